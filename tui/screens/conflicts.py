"""Conflicts (``c``, or the top bar's ⚠): the notes two machines changed apart, each with its diff; keep mine,
keep theirs or keep both after a yes.

The same core as ``kms conflicts`` and ``kms conflicts resolve`` (``server.writes.conflict_resolve``): keeping
mine trashes the copy, keeping theirs rewrites the note as the person's revertible change, keeping both makes
the other side a note of its own. Editing the note by hand stays in the shell (``kms conflicts resolve ID
--edit``) or the dashboard's ``e`` on the note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Label, Static

from server import humanize
from server.errors import KmsError
from server.writes import conflict_resolve
from tui.screens.modals import YesNoScreen

if TYPE_CHECKING:
    from tui.app import KmsDashboard

EMPTY = "No open conflicts: no note has two versions waiting for you."
HINT = "m keeps mine · t keeps theirs · b keeps both · `kms conflicts resolve ID --edit` merges by hand"
SAID = {
    "mine": "keep the note as it is; the copy goes to .trash/",
    "theirs": "the other side replaces the note (kms revert takes it back); the copy goes to .trash/",
    "both": "the other side becomes a note of its own beside it; the copy goes to .trash/",
}


class ConfirmKeep(YesNoScreen):
    """One resolution, after a yes: what happens to which files."""

    BINDINGS = [Binding("y", "confirm", "Resolve"), Binding("n,escape", "cancel", "Cancel")]

    def __init__(self, item: dict[str, Any], keep: str) -> None:
        super().__init__()
        self.item, self.keep = item, keep

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = f"Keep {self.keep}"
            yield Label(Text(f"{self.item['vault']}/{self.item['path']}", style="bold"))
            yield Static(Text(SAID[self.keep]), id="reason")
            with Horizontal(classes="buttons"):
                yield Button("Resolve (y)", id="confirm", variant="warning")
                yield Button("Cancel (n)", id="cancel", variant="primary")
        yield Footer()


class ConflictsScreen(Screen[None]):
    """Every open conflict, oldest first, the selected one's diff below; m / t / b resolve it after a yes."""

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("m", "keep('mine')", "Keep mine"),
        Binding("t", "keep('theirs')", "Keep theirs"),
        Binding("b", "keep('both')", "Keep both"),
        Binding("g", "reload", "Reload"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.items: list[dict[str, Any]] = []
        self.loaded = False
        self.last: dict[str, Any] | KmsError | None = None
        self.diff = ""  # the diff shown

    @property
    def kms(self) -> KmsDashboard:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(
            Text.assemble(("Conflicts", "bold"), "  ·  notes with two versions, from two machines"),
            id="conflicts-title",
        )
        yield DataTable(cursor_type="row", zebra_stripes=True, id="conflicts")
        with VerticalScroll(id="conflict-diff-box"):
            yield Static("", id="conflict-diff")
        yield Static(Text(HINT, style="dim"), id="conflicts-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, width in (("Since", 7), ("Note", 28), ("Tool", 11), ("Other side", 30), ("Vault", 8)):
            table.add_column(label, width=width, key=label)
        table.focus()
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    @work(group="conflicts", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        items = await self.kms.db(conflict_resolve.listing, diffs=True)
        self.items = items
        now = self.kms.clock()
        table = self.query_one(DataTable)
        table.clear()
        for c in items:
            table.add_row(
                humanize.ago(c["openedAt"], now),
                Text(c["path"], no_wrap=True, overflow="ellipsis"),
                Text(c["source"]),
                Text(c["copyPath"] or "(a git merge)", no_wrap=True, overflow="ellipsis"),
                Text(c["vault"], no_wrap=True, overflow="ellipsis"),
                key=str(c["id"]),
            )
        status = self.query_one("#conflicts-status", Static)
        status.update(Text(EMPTY if not items else f"{len(items)} open · {HINT}", style="dim"))
        self.show_diff()
        self.loaded = True

    def selected(self) -> dict[str, Any] | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((c for c in self.items if str(c["id"]) == key), None)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_diff()

    def show_diff(self) -> None:
        """The selected conflict's diff from the note (mine, ``-``) to the other side (theirs, ``+``)."""
        item = self.selected()
        self.diff = item["diff"] if item else ""
        text = Text()
        for line in self.diff.splitlines(keepends=True):
            style = (
                "green" if line.startswith("+") else "red" if line.startswith("-") else "dim" if line[:1] == "@" else ""
            )
            text.append(line, style=style)
        self.query_one("#conflict-diff", Static).update(text)

    def action_keep(self, keep: str) -> None:
        item = self.selected()
        if item is not None:
            self.resolve(item, keep)

    @work(group="conflicts-resolve", exclusive=True, exit_on_error=False)
    async def resolve(self, item: dict[str, Any], keep: str) -> None:
        if not await self.app.push_screen_wait(ConfirmKeep(item, keep)):
            return
        try:
            result = await self.kms.db(conflict_resolve.resolve_conflict, item["id"], keep)
        except KmsError as e:
            self.last = e
            self.notify(e.message, title=f"Can't resolve {item['path']}", severity="error", timeout=8)
            return
        self.last = result
        self.notify(f"{item['vault']}/{item['path']}: kept {keep}.", title="Resolved")
        self.reload()
