"""Does a text look like instructions planted for an AI agent (prompt injection, memory poisoning)?

``looks_like_instructions(text)`` answers the reasons it does (empty: it does not). It is the one detector:
the write guard stages an agent write whose text it flags for the person's approval
(``server.writes.guard``), and ``kms doctor`` lists the notes it flags. It looks for what a note written for
people almost never holds: words that override an agent's instructions, words addressed to an AI model,
kms's own tool names, a request to send data to an address, characters that hide text from the person.
Ordinary imperatives ("install the package", "run the tests") are not flagged: notes are full of them.
False positives are measured on real vaults in ``bench/planted_false_positives.py``.
"""

from __future__ import annotations

import re
from typing import Any

# (reason, words, pattern): each pattern is specific enough to be rare in notes people write for themselves.
# It is matched against the lower-cased text (a case-insensitive pattern is far slower in Python's ``re``),
# and only around its words (``_around``), so its cost follows how often they occur, not the note's size.
_RULES: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    (
        "overrides instructions",
        ("ignore", "disregard", "forget", "override", "bypass"),
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|my\s+|these\s+|those\s+)*"
            r"(?:(?:previous|prior|above|earlier|preceding|original|existing|system|safety|other)\s+)?"
            r"(?:instructions?|prompts?|directives?|system\s+prompt)\b|"
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|these\s+|those\s+)*"
            r"(?:your|previous|prior|above|earlier|preceding|system|safety)\s+(?:rules|guidelines|guardrails)\b",
        ),
    ),
    (
        "overrides instructions",
        ("instructions", "system prompt", "you are now", "jailbreak"),
        re.compile(
            r"\b(?:new|updated|real|actual)\s+(?:system\s+)?instructions\s*:|\bsystem\s+prompt\s*:|"
            r"\byou\s+are\s+now\s+(?:in\s+)?(?:an?\s+|the\s+)?(?:unrestricted|jailbroken|developer\s+mode|dan)\b|"
            r"\bjailbreak\b",
        ),
    ),
    (
        "addressed to an AI agent",
        (
            *("if you are", "attention", "note to", "message to", "message for", "dear ", "as an ai", "as a language"),
            *("ai,", "ai:", "llm", "claude", "gpt", "copilot", "chatbot", "assistant,", "assistant:", "agent,"),
            *("agent:", "agents,", "agents:"),
        ),
        re.compile(
            r"\b(?:if\s+you\s+are\s+an?|attention|note\s+to|message\s+(?:to|for)|dear)\s+(?:the\s+|any\s+)?"
            r"(?:ai|llm|assistant|agent|language\s+model|chatbot|claude|gpt|copilot)\b|"
            r"\b(?:ai|llm|claude|assistant|agent)s?\s*(?:,|:)\s*(?:you\s+)?(?:must|should|shall|need\s+to|have\s+to|"
            r"will|are\s+(?:to|required))\b|"
            r"\bas\s+an?\s+(?:ai|llm|language\s+model)\b[^.\n]{0,40}\b(?:you\s+)?(?:must|should|will)\b",
        ),
    ),
    (
        "hides from the person",
        (
            "not tell",
            "n't tell",
            "never tell",
            "not inform",
            "not mention",
            "not alert",
            "not notify",
            "not show",
            "n't show",
            "n't inform",
            "n't mention",
            "n't alert",
            "n't notify",
            "never show",
            "never inform",
            "never mention",
            "never alert",
            "never notify",
            "without",
        ),
        re.compile(
            r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|alert|notify|show)\s+"
            r"(?:the\s+|your\s+)?(?:user|person|human|owner)\b|"
            r"\bwithout\s+(?:telling|asking|informing|notifying|alerting)\s+(?:the\s+|your\s+)?(?:user|person|human|owner)\b",
        ),
    ),
    (
        "sends data to an address",
        ("http",),
        re.compile(
            r"\b(?:send|upload|forward|transmit|exfiltrate|leak|post)\b[^\n]{0,60}?"
            r"\b(?:notes?|contents?|secrets?|credentials|api\s+keys?|tokens?|passwords?|\.ssh|\.env|"
            r"environment|everything|vault|conversation|chat|history|memory|memories)\b[^\n]{0,60}?"
            r"\b(?:to|into|at)\s+<?https?://",
        ),
    ),
    (
        "sends data to an address",
        ("http",),
        re.compile(
            r"https?://[^\s)>\]]*(?:webhook\.site|requestbin|pipedream\.net|ngrok|burpcollaborator|interact\.sh|"
            r"oast\.)|https?://[^\s)>\]]*[?&](?:data|secret|token|key|password|content|notes?)=(?:\{|\$|%7b)",
        ),
    ),
    (
        "hidden characters",
        (),
        re.compile("[\U000e0000-\U000e007f\u202a-\u202e\u2066-\u2069]"),  # tag characters, bidi overrides
    ),
)


# kms's tool names as they are written (lower case): matched on the text as written, so `$KMS_VAULT` is no tool
TOOL_NAME = re.compile(r"\b(?:mcp__\w+|kms_(?:[a-z]+_)*[a-z]+)\b")


def looks_like_instructions(text: str) -> list[str]:
    """The reasons ``text`` looks like instructions planted for an AI agent, each with the words that show
    it (``reason: "words"``), at most one per kind; empty when it reads like a person's note."""
    found: dict[str, str] = {}
    if ("kms_" in text or "mcp__" in text) and (tool := TOOL_NAME.search(text)):
        found["names kms's tools"] = f'names kms\'s tools: "{tool.group(0)[:60]}"'
    lower = text.lower()
    for reason, words, pattern in _RULES:
        if reason in found:
            continue
        if words:
            m = next((m for lo, hi in _around(lower, words) if (m := pattern.search(lower, lo, hi))), None)
        else:
            m = None if text.isascii() else pattern.search(text)
        if m:
            shown = " ".join(m.group(0).split())[:60]
            found[reason] = f'{reason}: "{shown}"' if reason != "hidden characters" else reason
    return list(found.values())


CONTEXT = 200  # characters around a rule's word that its pattern may need (the longest spans ~180)


def _around(lower: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    """The stretches of the text around each occurrence of one of ``words``, merged: a pattern is tried there
    only, so its cost follows the words' occurrences, not the note's size."""
    spans: list[tuple[int, int]] = []
    for word in words:
        at = lower.find(word)
        while at != -1:
            spans.append((max(0, at - CONTEXT), at + len(word) + CONTEXT))
            at = lower.find(word, at + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def strings_in(value: Any, skip: frozenset[str] = frozenset()) -> list[str]:
    """Every string in a call's arguments (nested too), except the values of the keys in ``skip``."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in skip for s in strings_in(v, skip)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings_in(v, skip)]
    return []
