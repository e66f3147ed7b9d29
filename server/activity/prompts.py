"""The prompts a person runs as slash commands in the host (``/mcp__kms__start``...): static texts, with the
vault's data filled in when the prompt is fetched.

Each prompt leads the agent to tools of one tier and is offered only to a session whose tiers allow it
(``capture`` asks for writes). The data comes from the same places the tools answer from, under the same
rules: ``start`` and ``recall`` embed ``kms_start``'s and ``kms_recall``'s answers (the adapter runs the
tools, so gates, scope, the cap and read tracking are theirs), and ``review`` shows only calls and changes
on visible notes of the session's vaults.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import apsw

from server.activity import approvals
from server.config.allowlist import describe
from server.config.session_contract import SessionConfig
from server.config.tiers import Tier, tier_enabled
from server.humanize import ago
from server.index.notes import VISIBLE
from server.vault.scope import Vaults, VaultScope

RECENT_CHANGES = 20  # agent changes a review shows
RECENT_WINDOW_S = 7 * 86_400  # how far back a review looks
REVIEW_SCAN = 2_000  # the newest calls a review looks through (the log grows for ever)
PENDING_SHOWN = 20


@dataclass(frozen=True)
class PromptArg:
    name: str
    description: str
    required: bool = False


@dataclass(frozen=True)
class PromptSpec:
    """A prompt: ``tier`` is what the tools it leads to need."""

    name: str
    title: str
    description: str
    tier: Tier
    arguments: tuple[PromptArg, ...] = ()


START = PromptSpec(
    "start",
    "Orient in the notes",
    "Brief the agent on the person's notes: what this session may do, the map of the vaults, what "
    "changed since the last visit, remembered facts (kms_start).",
    "read",
)
# Claude Code and Gemini CLI split a slash command's text at every space and pass word N as the prompt's
# argument N, quotes and all (anthropics/claude-code#14210, #70284): `/mcp__kms__recall auth errors` sent
# topic "auth" and dropped the rest. So the topic takes its further words as optional arguments of their own,
# and ``recall_topic`` puts them back together.
TOPIC_WORDS = 8
RECALL = PromptSpec(
    "recall",
    "Recall notes about a topic",
    "Bring what the notes say about a topic into the conversation, within a token budget (kms_recall).",
    "read",
    (
        PromptArg("topic", "What to recall, in a few words.", required=True),
        *(
            PromptArg(f"word{n}", f"Word {n} of the topic, for hosts that split a command at spaces.")
            for n in range(2, TOPIC_WORDS + 1)
        ),
    ),
)


def recall_topic(arguments: Mapping[str, str]) -> str:
    """The topic the person typed: its words in order, and no quotes that only held them together."""
    names = [a.name for a in RECALL.arguments]
    words = " ".join(str(arguments.get(n) or "").strip() for n in names).split()
    topic = " ".join(words)
    while len(topic) >= 2 and topic[0] == topic[-1] and topic[0] in "\"'":
        topic = topic[1:-1].strip()
    return topic.strip("\"'").strip() if topic.count('"') == 1 or topic.count("'") == 1 else topic


CAPTURE = PromptSpec(
    "capture",
    "Record this session's decisions",
    "Ask the agent to record the decisions made in this session in the notes (kms_remember, "
    "kms_append), where this session may write.",
    "write",
)
REVIEW = PromptSpec(
    "review",
    "Review agents' changes",
    "What waits for the person's approval and what agents changed in the notes recently, for the "
    "agent to review with the person.",
    "read",
)
PROMPTS = (START, RECALL, CAPTURE, REVIEW)


def listed(config: SessionConfig) -> list[PromptSpec]:

    return [p for p in PROMPTS if tier_enabled(config, p.tier)]


def _block(data: Any) -> str:
    return "```json\n" + json.dumps(data, ensure_ascii=False, indent=1, default=str) + "\n```"


def start_text(answer: dict[str, Any]) -> str:
    return (
        "Orient yourself in my notes (kms) with this brief before we go on. Tell me in two or three sentences "
        "what you now know about my notes and what you may do with them; then wait for my request.\n\n" + _block(answer)
    )


def recall_text(topic: str, bundle: dict[str, Any]) -> str:
    if bundle.get("error"):
        return f"Recalling {topic!r} from my notes (kms) failed: {bundle.get('message')}. Tell me, and suggest a fix."
    parts = [
        f"Here is what my notes (kms) say about {topic!r}: the best-matching sections and the notes they link, "
        f"within {bundle.get('budgetTokens')} tokens. Use it as context for what we do next; read more with "
        "kms_read (noteId and section as given) only where it is not enough. Say which notes you relied on."
    ]
    for item in bundle.get("items", []):
        where = f"{item.get('title')}" + (f" › {item['heading']}" if item.get("heading") else "")
        more = item.get("readMore") or {}
        parts.append(
            f"## {where}\n(noteId {more.get('noteId', item.get('noteId'))}; {item.get('why', '')})\n\n"
            f"{item.get('text', '')}"
        )
    if not bundle.get("items"):
        parts.append("(The notes hold nothing on this topic.)")
    return "\n\n".join(parts)


def capture_text(config: SessionConfig, project: str | None) -> str:
    where = "; ".join(f"{p} ({describe(p)})" for p in config.allowlist) if config.allowlist else "any folder"
    memory = f"the memory folder {config.memory_folder!r}" if config.memory_folder else "no memory folder"
    return (
        "Record the decisions we made in this session in my notes (kms), so a later session finds them.\n\n"
        "1. List each decision in one line: what was decided, why, and what it replaces, if anything. Leave out "
        "what was only discussed.\n"
        "2. Check first what the notes already say (kms_search or kms_recall) so nothing is recorded twice.\n"
        "3. Record durable facts about me or the project with kms_remember; append the decisions to the "
        "project's decision note with kms_append (create it with kms_create if there is none).\n"
        "4. Show me what you recorded and where.\n\n"
        f"This session may write in: {where} (and {memory}). Project: {project or 'not set'}. Writes may wait "
        "for my approval; each one can be reverted from the kms dashboard."
    )


def review_data(
    conn: apsw.Connection, scope_names: tuple[str, ...], vault_id: Vaults, now: float | None = None
) -> dict[str, Any]:
    """The calls waiting for the person and the agents' recent successful changes, on visible notes of the
    session's vaults only (``scope_names``: theirs, empty for every vault; ``vault_id``: their ids)."""

    at = time.time() if now is None else now
    pending = []
    for item in approvals.list_pending(conn, now=at):
        files = item.files
        if any(f.get("hidden") for f in files) or (
            scope_names and any(f.get("vault") not in scope_names for f in files)
        ):
            continue
        pending.append(
            {
                "id": item.id,
                "tool": item.tool,
                "session": item.session_id,
                "waiting": ago(item.created_at, at),
                "summary": item.input_summary,
                "files": [
                    {
                        "path": f.get("newPath") or f.get("path"),
                        "added": f.get("added", 0),
                        "removed": f.get("removed", 0),
                    }
                    for f in files
                ],
            }
        )
    scope, scope_params = VaultScope.of(vault_id).sql()
    changes = [
        {
            "id": r[0],
            "when": ago(float(r[1]), at),
            "session": r[2],
            "tool": r[3],
            "noteId": r[4],
            "path": r[5],
            "title": r[6],
            "linesAdded": r[7],
        }
        for r in conn.execute(
            f"""SELECT t.id, t.at, t.session_id, t.tool, n.id, n.path, n.title, t.lines_added FROM tool_invocations t
            JOIN notes n ON n.id = t.note_id
            WHERE t.id > (SELECT coalesce(max(id), 0) FROM tool_invocations) - ? AND t.actor = 'agent'
              AND t.status = 'success' AND t.at > ? AND {VISIBLE} {scope}
            ORDER BY t.id DESC LIMIT ?""",
            (REVIEW_SCAN, at - RECENT_WINDOW_S, *scope_params, RECENT_CHANGES),
        )
    ]
    return {
        "pending": pending[:PENDING_SHOWN],
        "pendingMore": max(0, len(pending) - PENDING_SHOWN),
        "recentChanges": changes,
    }


def review_text(data: dict[str, Any]) -> str:
    head = (
        "Review with me what agents did in my notes (kms). For each change below, read the note (kms_read) "
        "where needed and tell me in one line whether it looks right; flag anything wrong, duplicated or "
        "surprising. I approve or reject waiting calls myself, in the kms dashboard or with `kms approve` / "
        "`kms reject`; a change can be reverted from the dashboard."
    )
    if not data["pending"] and not data["recentChanges"]:
        return head + "\n\nNothing waits for approval and no agent changed a note recently: say so."
    return head + "\n\n" + _block(data)
