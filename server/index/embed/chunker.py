"""Split a note into embedding chunks: one per heading section, each inside the model's window.

Why per section: a note about several things gets one vector per thing, so a query matches the
section that answers it (and the hit can show that section). Why the title/heading prefix: a
section body alone ("Run it nightly.") often does not say what it is about. Why content hashes:
a chunk's vector is stored under the hash of exactly the text embedded, so an unchanged chunk is
never embedded twice, whatever else changed in the note or the index.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from server.index.embed.model import MAX_TOKENS, MODEL_NAME
from server.vault.markdown import FENCE, atx_heading, bare, fence_closes, split_lines

TokenCounter = Callable[[Sequence[str]], list[int]]

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
MIN_BUDGET = 64  # content tokens per chunk, even under an absurdly long title


@dataclass(frozen=True)
class Chunk:
    ord: int
    heading: str | None  # "Parent > Section" trail, None for text before the first heading
    content: str  # the section text (what an excerpt shows)
    text: str  # what is embedded: title and heading, then the content
    tokens: int  # word pieces of ``text`` (without the two special tokens)
    hash: str  # sha256 of model name + ``text``: the embeddings table key


def approx_tokens(texts: Sequence[str]) -> list[int]:
    """A tokenizer-free upper-ish estimate (about 1.3 word pieces per word), for tests and tools."""
    return [len(re.findall(r"\w+|[^\w\s]", t)) * 4 // 3 for t in texts]


def chunk_hash(text: str) -> str:
    return hashlib.sha256(f"{MODEL_NAME}\n{text}".encode()).hexdigest()


def prefix(title: str, heading: str | None) -> str:
    return f"{title}\n{heading}\n" if heading else f"{title}\n"


def sections(body: str, title: str = "") -> list[tuple[str | None, str]]:
    """``(heading trail, text)`` per ATX heading, outside fenced code (``server.vault.markdown``'s
    rules, as the writes see them); empty sections dropped.

    A heading that repeats the note title (the usual ``# Title`` line) is left out of the
    trail: the title already prefixes every chunk.
    """
    out: list[tuple[str | None, str]] = []
    trail: list[tuple[int, str]] = []
    current: str | None = None
    lines: list[str] = []
    fence: str | None = None

    def flush() -> None:
        text = "\n".join(lines).strip()
        if text:
            out.append((current, text))

    for line in map(bare, split_lines(body)):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif fence_closes(fence, line):
                fence = None
        elif fence is None:
            h = atx_heading(line)
            if h:
                flush()
                level, text = h
                if text.casefold() == title.strip().casefold():
                    text = ""
                trail = [(lv, t) for lv, t in trail if lv < level] + [(level, text)]
                current = " > ".join(t for _, t in trail if t) or None
                lines = []
                continue
        lines.append(line)
    flush()
    return out


def _split_oversized(piece: str, budget: int, count: _CachedCounter) -> list[str]:
    """Sentences, then word windows, for one paragraph longer than the budget."""
    sentences = [s for s in _SENTENCE_END.split(piece) if s.strip()]
    if len(sentences) > 1:
        count.prime(sentences)
        return _pack(sentences, budget, count, " ")
    words = piece.split()
    count.prime(words)
    out: list[str] = []
    cur: list[str] = []
    used = 0
    for word in words:
        n = max(1, count(word))
        if cur and used + n > budget:
            out.append(" ".join(cur))
            cur, used = [], 0
        cur.append(word)
        used += n
    if cur:
        out.append(" ".join(cur))
    return out


def _pack(pieces: list[str], budget: int, count: _CachedCounter, sep: str) -> list[str]:
    """Greedy: join consecutive pieces while they fit; split a piece that alone does not."""
    out: list[str] = []
    cur: list[str] = []
    used = 0
    for piece in pieces:
        n = count(piece)
        if n > budget:
            if cur:
                out.append(sep.join(cur))
                cur, used = [], 0
            out.extend(_split_oversized(piece, budget, count))
            continue
        if cur and used + n > budget:
            out.append(sep.join(cur))
            cur, used = [], 0
        cur.append(piece)
        used += n
    if cur:
        out.append(sep.join(cur))
    return out


def chunk_note(
    title: str, body: str, count_tokens: TokenCounter = approx_tokens, max_tokens: int = MAX_TOKENS
) -> list[Chunk]:
    """The chunks of one note, in order; a note with no body text still gets its title chunk.

    Word-piece counts add up across whitespace (BERT pre-tokenises on it), so the size of a
    joined group is the sum of its parts; the final count is taken on the exact text anyway.
    """
    secs = sections(body, title) or [(None, "")]
    prefixes = [prefix(title, h) for h, _ in secs]
    counts = count_tokens(prefixes + [t for _, t in secs])
    pre_counts, sec_counts = counts[: len(secs)], counts[len(secs) :]
    pieces: list[tuple[str | None, str]] = []
    for (heading, text), pre_n, n in zip(secs, pre_counts, sec_counts, strict=True):
        budget = max(MIN_BUDGET, max_tokens - 2 - pre_n)
        if n <= budget:
            pieces.append((heading, text))
            continue
        paragraphs = [p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip()]
        count = _CachedCounter(count_tokens)
        count.prime(paragraphs)
        pieces.extend((heading, part) for part in _pack(paragraphs, budget, count, "\n\n"))
    texts = [prefix(title, h) + c for h, c in pieces]
    final = count_tokens(texts)
    return [
        Chunk(i, h, c, t, n, chunk_hash(t)) for i, ((h, c), t, n) in enumerate(zip(pieces, texts, final, strict=True))
    ]


class _CachedCounter:
    """Token counts of pieces, asked for one at a time but computed a batch at a time
    (``prime``): one tokenizer call per paragraph list instead of one per sentence or word."""

    def __init__(self, count_tokens: TokenCounter) -> None:
        self.count_tokens = count_tokens
        self.known: dict[str, int] = {}

    def prime(self, pieces: list[str]) -> None:
        todo = list(dict.fromkeys(p for p in pieces if p not in self.known))
        if todo:
            self.known.update(zip(todo, self.count_tokens(todo), strict=True))

    def __call__(self, s: str) -> int:
        if s not in self.known:
            self.known[s] = self.count_tokens([s])[0]
        return self.known[s]
