"""The selected invocation in full: what the agent asked, what happened, and the exact
inserted text with a few lines of context in the note as it is NOW; or an edit a session made
outside kms: the version kms saw, its diff against the one before, and how to undo it."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from server import humanize
from server.activity import changes
from server.activity.feed import ContextLine, Detail
from server.activity.outside_feed import OutsideDetail
from server.writes.undo.revert_files import diff_text
from tui import format as fmt

MAX_INSERTED_LINES = 30
NOTE_STATE_STYLE = {
    "present": ("✓", "green"),
    "moved": ("↕", "yellow"),
    "edited": ("✎", "yellow"),
    "ambiguous": ("?", "yellow"),
    "missing": ("✗", "red"),
    "unreadable": ("✗", "red"),
    "none": ("·", "dim"),
}


def _value(v: Any) -> str:
    if isinstance(v, dict) and v.get("__absent__"):
        return "(absent)"
    return json.dumps(v, ensure_ascii=False)


def render_detail(d: Detail, now: float) -> RenderableType:
    """A Rich renderable (no Textual): header facts, then the note context or the props diff."""
    inv, note = d.invocation, d.note
    reverted_by = inv.get("reverted_by")
    head = Text()
    head.append(f"#{inv['id']} ", style="bold")
    head.append(inv["tool"], style="bold cyan")
    head.append("  ")
    overwritten_at = inv.get("overwritten_at")
    head.append_text(fmt.status_text(inv["status"], reverted_by is not None, overwritten_at is not None))
    head.append(f"  {humanize.clock_time(inv['at'], now)}  session {inv['session_id']} ({inv['actor']})", style="dim")

    facts = Table.grid(padding=(0, 1))
    facts.add_column(style="bold", no_wrap=True)
    facts.add_column(overflow="fold")
    where = "/".join(x for x in (inv.get("vault"), inv.get("path")) if x) or "-"
    facts.add_row("Note", Text(where))
    if inv.get("bytes_before") is not None or inv.get("bytes_after") is not None:
        b0, b1 = inv.get("bytes_before") or 0, inv.get("bytes_after") or 0
        facts.add_row("Bytes", f"{b0} → {b1} ({b1 - b0:+d}), {inv.get('lines_added') or 0:+d} lines")
    facts.add_row("Input", Text(inv.get("input_summary") or "-"))
    if inv["status"] != "success" or inv.get("message"):
        facts.add_row(
            "Result",
            Text(
                f"{inv.get('error') or ''} {inv.get('message') or ''}".strip(),
                style="red" if inv["status"] != "success" else "",
            ),
        )
    if inv.get("reverts_id"):
        facts.add_row("Reverts", f"#{inv['reverts_id']}")
    if reverted_by is not None:
        facts.add_row("Reverted", f"by #{reverted_by}")
    elif overwritten_at is not None:
        facts.add_row(
            "Overwritten",
            Text(
                f"{humanize.clock_time(overwritten_at, now)}: a later save of the note "
                "dropped the text this call wrote",
                style="yellow",
            ),
        )
    parts: list[RenderableType] = [head, facts]

    change = changes.from_row(inv)  # what the call did decides what is shown, not which tool did it
    if isinstance(change, changes.PropertiesChanged) and change.after:
        props = Table("Property", "Before", "After", box=None, padding=(0, 1), header_style="bold")
        for key, after in change.after.items():
            props.add_row(key, _value(change.before.get(key, {"__absent__": True})), _value(after))
        parts += [Text(""), props]

    if isinstance(change, changes.FilesChanged):
        parts += [Text(""), *diff_renderables(change)]

    inserted = changes.inserted(change)
    symbol, style = NOTE_STATE_STYLE.get(note.state, ("?", ""))
    if note.state != "none" or inserted:
        line = Text("\nIn the note now: ", style="bold")
        line.append(f"{symbol} {note.explanation}", style=style)
        if note.bytes_now is not None:
            line.append(f"  ({note.bytes_now} bytes now)", style="dim")
        parts.append(line)
    if note.lines:
        width = len(str(note.lines[-1].number))
        for cl in _elide(list(note.lines)):
            if cl is None:
                parts.append(Text(f"{'⋮':>{width}}  │ …", style="dim"))
                continue
            row = Text(f"{cl.number:>{width}}", style="dim")
            row.append("+│ " if cl.inserted else " │ ", style="bold green" if cl.inserted else "dim")
            for text, is_new in cl.pieces:
                row.append(text, style="black on green" if is_new else "")
            parts.append(row)
    elif inserted and note.state != "present":
        parts.append(Text("Inserted text:", style="bold"))
        parts.append(Text(inserted[1].strip("\n"), style="green"))
    return Group(*parts)


def render_outside(d: OutsideDetail, now: float) -> RenderableType:
    """An edit a session made outside kms: who, the note, the size change, the diff against the version before,
    and the undo it has (the session's, or restoring the version before from the note's history)."""
    r = d.row
    head = Text()
    head.append("↗ ", style="bold magenta")
    head.append(r["tool"], style="bold magenta")
    head.append(
        f"  {humanize.clock_time(r['at'], now)}  session {r['session_id']} (reported by its hooks)", style="dim"
    )
    facts = Table.grid(padding=(0, 1))
    facts.add_column(style="bold", no_wrap=True)
    facts.add_column(overflow="fold")
    facts.add_row("Note", Text(f"{r['vault']}/{r['path']}" + (f"  ({r['title']})" if r.get("title") else "")))
    was = "a new note" if d.before is None else f"version {d.before}"
    facts.add_row("Version", f"{d.number}, seen {humanize.clock_time(r['seen_at'], now)} ({was} before it)")
    facts.add_row("Size", f"{r['size']} bytes ({r['size_change']:+d})")
    undo = Text(f"u undoes session {r['session_id']} (a preview first: it restores this note too)")
    if d.before is not None:
        undo.append(f"; h: this note's history, where r restores version {d.before} after a yes", style="")
    facts.add_row("Undo", undo)
    parts: list[RenderableType] = [head, facts, Text("")]
    lines = d.diff.splitlines()[2:]  # the --- +++ header: the Note and Version above
    shown = (
        lines
        if len(lines) <= MAX_INSERTED_LINES
        else [*lines[: MAX_INSERTED_LINES - 1], f"… {len(lines) - MAX_INSERTED_LINES + 1} more lines"]
    )
    for line in shown:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        parts.append(Text(line, style=style))
    if not lines:
        parts.append(Text("(the text is the same as the version before)", style="dim"))
    return Group(*parts)


def diff_renderables(change: changes.FilesChanged, limit: int = MAX_INSERTED_LINES) -> list[Text]:
    """The change as a diff, file by file (a move names both paths), long hunks elided."""
    out: list[Text] = []
    for f in change.files:
        title = Text(f.path, style="bold")
        if f.new_path:
            title.append(f" → {f.new_path}", style="bold cyan")
        if f.hidden:
            title.append("  (hidden from agents)", style="dim")
        out.append(title)
        lines = diff_text(f.old, f.new, f.path, f.new_path).splitlines()[2:]  # the --- +++ header is the title
        shown = lines if len(lines) <= limit else [*lines[: limit - 1], f"… {len(lines) - limit + 1} more lines"]
        for line in shown:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            out.append(Text(line, style=style))
        if not lines:
            out.append(Text("  (moved, text unchanged)", style="dim"))
    return out


def _elide(lines: list[ContextLine], keep: int = MAX_INSERTED_LINES) -> list[ContextLine | None]:
    """Long insertions (a whole created note) keep their first and last lines; None marks the cut."""
    inserted = [i for i, cl in enumerate(lines) if cl.inserted]
    if len(inserted) <= keep:
        return list(lines)
    cut_from, cut_to = inserted[keep * 2 // 3], inserted[-(keep // 3)]
    return [*lines[:cut_from], None, *lines[cut_to:]]


def plain_text(renderable: RenderableType, width: int = 100) -> str:
    """What a renderable shows, as plain text (for tests and for copying)."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


class DetailView(VerticalScroll):
    """Scrollable detail of one invocation (empty until something is selected)."""

    DEFAULT_CSS = """
    DetailView > Static { width: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = "Detail"
        self.detail: Detail | None = None
        self.outside: OutsideDetail | None = None  # the edit made outside kms shown instead of a call
        self.renderable: RenderableType = ""
        self.can_focus = True

    def compose(self):  # noqa: ANN201 - Textual's ComposeResult
        yield Static("Select a row to see what the agent did.", id="detail-body")

    def show(self, detail: Detail | None, now: float) -> None:
        self.detail, self.outside = detail, None
        body = self.query_one("#detail-body", Static)
        self.renderable = Text("No such invocation.", style="dim") if detail is None else render_detail(detail, now)
        body.update(self.renderable)
        self.scroll_home(animate=False)

    def show_outside(self, detail: OutsideDetail | None, now: float) -> None:
        self.detail, self.outside = None, detail
        self.renderable = (
            Text("kms no longer keeps this version.", style="dim") if detail is None else render_outside(detail, now)
        )
        self.query_one("#detail-body", Static).update(self.renderable)
        self.scroll_home(animate=False)

    def show_message(self, text: str) -> None:
        self.detail = self.outside = None
        self.renderable = Text(text, style="dim")
        self.query_one("#detail-body", Static).update(self.renderable)

    def text(self) -> str:
        return plain_text(self.renderable)
