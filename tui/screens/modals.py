"""Small modal screens: review a revert, view a note, a session's reads."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Label, Static, TextArea
from textual.widgets.text_area import Selection

from server import humanize
from server.activity.feed import NoteText


class YesNoScreen(ModalScreen[bool]):
    """A question answered yes (``y``, the confirm button) or no (``n``, Escape, the cancel button); a subclass
    composes what is asked, with buttons ``#confirm`` and ``#cancel``."""

    BINDINGS = [Binding("y", "confirm", "Yes"), Binding("n,escape", "cancel", "No")]

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class ReviewScreen(ModalScreen[bool]):
    """Confirm taking back one agent write, showing exactly what will be removed or restored.

    When the revert module refused (``canRevert`` false) only the reason and Close are shown.
    """

    BINDINGS = [
        Binding("y", "confirm", "Revert"),
        Binding("n,escape", "cancel", "Cancel"),
    ]

    def __init__(self, preview: dict[str, Any]) -> None:
        super().__init__()
        self.preview = preview

    def compose(self) -> ComposeResult:
        p = self.preview
        with Vertical(id="dialog") as box:
            box.border_title = f"Revert #{p['invocationId']} ({p['tool']})"
            yield Label(Text(f"{p['vault']}/{p['path']}", style="bold"))
            if not p["canRevert"]:
                yield Static(Text(f"✗ Can't revert: {p['reason']}", style="bold red"), id="reason")
                with Horizontal(classes="buttons"):
                    yield Button("Close", id="cancel", variant="primary")
                return
            yield Static(self._plan_text(), id="plan")
            with VerticalScroll(id="removed"):
                yield Static(self._removed_text())
            with Horizontal(classes="buttons"):
                yield Button("Revert (y)", id="confirm", variant="error")
                yield Button("Cancel (n)", id="cancel", variant="primary")
        yield Footer()

    def _plan_text(self) -> Text:
        p = self.preview
        if p["action"] == "remove-text":
            n = len(p["removeText"] or "")
            return Text(
                f"Remove these {n} characters at offset {p['offset']} ({p['linesRemoved']} lines); "
                "nothing else in the note changes:"
            )
        if p["action"] == "restore-files":
            n = len(p.get("files") or [])
            return Text(
                f"Put back all {n} file(s) exactly as they were before the call (each is still what the "
                "call left). The call's changes, which the revert takes back:"
            )
        if p["action"] == "delete-note":
            return Text("Delete the note this call created (it is still exactly what the agent wrote):")
        return Text("Restore these properties to their values before the call:")

    def _removed_text(self) -> Text:
        p = self.preview
        if p["action"] == "restore-properties":
            t = Text()
            for key, change in (p.get("restore") or {}).items():
                t.append(f"{key}: ", style="bold")
                t.append(f"{change['from']!r}", style="red strike")
                t.append(" → ")
                t.append(f"{change['to']!r}\n", style="green")
            return t
        if p["action"] == "restore-files":
            t = Text()
            for f in p.get("files") or []:
                t.append(f["path"], style="bold")
                t.append(f" → {f['newPath']}\n" if f.get("newPath") else "\n", style="bold cyan")
                for line in f["diff"].splitlines()[2:]:
                    t.append(
                        line + "\n", style="green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
                    )
            return t
        t = Text()
        for i, line in enumerate((p.get("removeText") or "").split("\n")):
            if i:
                t.append("\n")
            t.append("-│ ", style="bold red")
            t.append(line or "⏎", style="black on red" if line else "dim")
        return t

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm" and self.preview["canRevert"])

    def action_confirm(self) -> None:
        self.dismiss(bool(self.preview["canRevert"]))

    def action_cancel(self) -> None:
        self.dismiss(False)


class NoteScreen(ModalScreen[None]):
    """The note as it is now, read-only, with the agent's inserted text selected."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("e", "app.edit_file", "Edit in $EDITOR"),
    ]

    def __init__(self, note: NoteText) -> None:
        super().__init__()
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide") as box:
            box.border_title = self.note.label
            found = self.note.offset is not None and self.note.length
            box.border_subtitle = "inserted text selected" if found else "read-only"
            yield TextArea(self.note.text, read_only=True, show_line_numbers=True, id="note-text", soft_wrap=True)
        yield Footer()

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.cursor_blink = False  # a viewer: a steady cursor (and stable screenshots)
        if self.note.offset is not None and self.note.length:
            start = _location(self.note.text, self.note.offset)
            end = _location(self.note.text, self.note.offset + self.note.length)
            area.selection = Selection(start, end)
            area.scroll_cursor_visible(center=True, animate=False)
        area.focus()


def _location(text: str, offset: int) -> tuple[int, int]:
    """Character offset -> (row, column) as TextArea counts them."""
    before = text[:offset]
    row = before.count("\n")
    return row, offset - (before.rfind("\n") + 1)


class PairScreen(ModalScreen[None]):
    """A device's pairing link for the review pages and its QR code (as ``kms review pair``): single use,
    ten minutes."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, link: str, qr: str, minutes: int) -> None:
        super().__init__()
        self.link, self.qr, self.minutes = link, qr, minutes

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="wide") as box:
            box.border_title = "Pair a device with the review pages"
            box.border_subtitle = f"scan it or open the link, once, within {self.minutes} minutes"
            yield Static(Text(self.qr), id="pair-qr")
            yield Static(Text(self.link, style="cyan"), id="pair-link")
        yield Footer()


class ReadsScreen(ModalScreen[None]):
    """Which notes a session's agent read (from ``note_reads``); Enter opens one."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close"), Binding("o", "open", "Open note")]

    def __init__(self, session_id: str, reads: list[dict[str, Any]], now: float) -> None:
        super().__init__()
        self.session_id = session_id
        self.reads = reads
        self.now = now

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide") as box:
            box.border_title = f"Notes read by session {self.session_id}"
            box.border_subtitle = f"{len(self.reads)} notes"
            if not self.reads:
                yield Static(Text("This session's agent has not read any note.", style="dim"))
            else:
                yield DataTable(cursor_type="row", id="reads")
        yield Footer()

    def on_mount(self) -> None:
        if not self.reads:
            return
        table = self.query_one(DataTable)
        for label, width in (("Note", 18), ("Path", 24), ("Reads", 5), ("Last read", 11)):
            table.add_column(label, width=width)
        for r in self.reads:
            table.add_row(
                Text(r.get("title") or r["note_id"], no_wrap=True, overflow="ellipsis"),
                Text(
                    f"{r['vault']}/{r['path']}" if r.get("path") else "(no longer indexed)",
                    style="dim",
                    no_wrap=True,
                    overflow="ellipsis",
                ),
                r["count"],
                humanize.clock_time(r["last_at"], self.now),
                key=r["note_id"],
            )
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        table = self.query_one(DataTable) if self.reads else None
        if table is not None and table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            self.app.action_open_read_note(str(key))  # type: ignore[attr-defined]
