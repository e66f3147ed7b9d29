"""A unified diff as rows a page shows: unified (one column) or side by side (old | new).

The diff text is the core's (``server.writes.staging`` for a staged call, ``server.activity.note_history.unified``
for versions): this module only lays it out, and never marks it up: every piece is plain text the templates
escape (a note is untrusted input).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

MAX_ROWS = 2000  # a page shows at most this many rows of one diff (the rest is counted, never silently cut)


@dataclass(frozen=True)
class Row:
    """One line of a unified diff: ``kind`` is head (``---``/``+++``), hunk (``@@``), add, del, ctx or note."""

    kind: str
    text: str


@dataclass(frozen=True)
class Pair:
    """One row side by side: the old line and the new (None: nothing on that side); ``kind`` as ``Row``'s,
    ``change`` for a line replaced by another."""

    kind: str
    old: str | None
    new: str | None


@dataclass
class DiffView:
    rows: list[Row]
    cut: int  # lines left out past MAX_ROWS

    @cached_property
    def pairs(self) -> list[Pair]:
        """The side-by-side rows, made only for a page that shows them (an item's own page)."""
        return _pairs(self.rows)


def _row(line: str) -> Row:
    if line.startswith(("--- ", "+++ ")):
        return Row("head", line)
    if line.startswith("@@"):
        return Row("hunk", line)
    if line.startswith("+"):
        return Row("add", line[1:])
    if line.startswith("-"):
        return Row("del", line[1:])
    if line.startswith("\\"):
        return Row("note", line)
    return Row("ctx", line[1:] if line.startswith(" ") else line)


def _pairs(rows: list[Row]) -> list[Pair]:
    """Removed lines beside the added lines that follow them (as a side-by-side view pairs a replacement)."""
    out: list[Pair] = []
    dels: list[str] = []
    adds: list[str] = []

    def flush() -> None:
        for i in range(max(len(dels), len(adds))):
            old = dels[i] if i < len(dels) else None
            new = adds[i] if i < len(adds) else None
            out.append(
                Pair("change" if old is not None and new is not None else "del" if new is None else "add", old, new)
            )
        dels.clear()
        adds.clear()

    for r in rows:
        if r.kind == "del":
            if adds:
                flush()
            dels.append(r.text)
        elif r.kind == "add":
            adds.append(r.text)
        else:
            flush()
            if r.kind == "ctx":
                out.append(Pair("ctx", r.text, r.text))
            elif r.kind != "head":
                out.append(Pair(r.kind, r.text, r.text))
    flush()
    return out


def view(diff: str) -> DiffView:
    lines = diff.splitlines()
    rows = [_row(line) for line in lines[:MAX_ROWS]]
    return DiffView(rows, max(0, len(lines) - MAX_ROWS))
