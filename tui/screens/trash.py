"""The trash (``t``): what is in the vaults' ``.trash/`` folders, who put it there and when; restore one.

The same core as ``kms trash list`` and ``kms trash restore`` (``server.writes.undo.trash``): a note an
agent trashed comes back as the revert of that call (its id kept, the revert recorded as the
person's); one moved there by hand is moved back. Emptying the trash, the only hard delete in kms,
stays in the shell (``kms trash empty``), out of reach of a stray key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Label, Static

from server import humanize
from server.errors import KmsError
from server.writes.undo import trash
from server.writes.undo.trash import Trashed, TrashedBy
from tui.screens.modals import YesNoScreen

if TYPE_CHECKING:
    from tui.app import KmsDashboard

EMPTY = "The trash is empty: nothing an agent (or you) trashed is waiting."
HINT = "r restores one · h its history · `kms trash empty` deletes for good"


def by_text(by: TrashedBy | None) -> Text:
    """Who put a file in the trash: an agent's session, or the person by hand."""
    if by is None:
        return Text("by hand", style="dim italic")
    return Text(by.session_id, style="cyan" if by.actor == "agent" else "", no_wrap=True, overflow="ellipsis")


class ConfirmRestore(YesNoScreen):
    """Restore one trashed note, after a yes: what comes back, and where."""

    BINDINGS = [Binding("y", "confirm", "Restore"), Binding("n,escape", "cancel", "Cancel")]

    def __init__(self, item: Trashed, by: TrashedBy | None) -> None:
        super().__init__()
        self.item, self.by = item, by

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = "Restore from the trash"
            yield Label(Text(f"{self.item.vault}/{self.item.path}", style="bold"))
            how = (
                f"the revert of #{self.by.invocation_id} (session {self.by.session_id}): the note gets its id "
                "back and the revert is recorded as yours"
                if self.by is not None
                else "moved back as it is, recorded as yours"
            )
            yield Static(
                Text(f"Put it back at {self.item.path}: {how}. Refused if a note took that place."), id="reason"
            )
            with Horizontal(classes="buttons"):
                yield Button("Restore (y)", id="confirm", variant="warning")
                yield Button("Cancel (n)", id="cancel", variant="primary")
        yield Footer()


class TrashScreen(Screen[None]):
    """Every trashed file, newest first; ``r`` (or Enter) restores the selected one after a yes."""

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("r", "restore", "Restore"),
        Binding("h", "history", "History"),
        Binding("g", "reload", "Reload"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[tuple[Trashed, TrashedBy | None]] = []
        self.loaded = False
        self.last_restore: dict[str, Any] | KmsError | None = None

    @property
    def kms(self) -> KmsDashboard:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(
            Text.assemble(("Trash", "bold"), "  ·  what agents (and you) put in the vaults' .trash/"), id="trash-title"
        )
        yield DataTable(cursor_type="row", zebra_stripes=True, id="trash")
        yield Static(Text(HINT, style="dim"), id="trash-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, width in (
            ("Trashed", 7),
            ("Note (goes back to)", 23),
            ("By session", 16),
            ("Call", 5),
            ("Vault", 8),
            ("Bytes", 6),
        ):
            table.add_column(label, width=width, key=label)
        table.focus()
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    @work(group="trash", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        entries = await self.kms.db(trash.listing)
        self.entries = entries
        now = self.kms.clock()
        table = self.query_one(DataTable)
        table.clear()
        for item, by in entries:
            table.add_row(
                humanize.ago(item.trashed_at, now),
                Text(item.path, no_wrap=True, overflow="ellipsis"),
                by_text(by),
                Text(f"#{by.invocation_id}" if by else "", justify="right"),
                Text(item.vault, no_wrap=True, overflow="ellipsis"),
                Text(str(item.size), justify="right"),
                key=f"{item.vault}\0{item.path}",
            )
        status = self.query_one("#trash-status", Static)
        status.update(Text(EMPTY if not entries else f"{len(entries)} in the trash · {HINT}", style="dim"))
        self.loaded = True

    def selected(self) -> tuple[Trashed, TrashedBy | None] | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((e for e in self.entries if f"{e[0].vault}\0{e[0].path}" == key), None)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_restore()

    def action_restore(self) -> None:
        entry = self.selected()
        if entry is not None:
            self.restore(*entry)

    def action_history(self) -> None:
        """Every version kms kept of the selected note, from before it was trashed."""
        entry = self.selected()
        if entry is not None:
            self.kms.show_history(entry[0].path, entry[0].vault)

    @work(group="trash-restore", exclusive=True, exit_on_error=False)
    async def restore(self, item: Trashed, by: TrashedBy | None) -> None:
        if not await self.app.push_screen_wait(ConfirmRestore(item, by)):
            return
        try:
            result = await self.kms.db(trash.restore, item.path, item.vault)
        except KmsError as e:
            self.last_restore = e
            self.notify(e.message, title=f"Can't restore {item.path}", severity="error", timeout=8)
            return
        self.last_restore = result
        self.notify(f"{item.vault}/{item.path} is back (recorded as #{result['invocationId']}).", title="Restored")
        self.reload()
