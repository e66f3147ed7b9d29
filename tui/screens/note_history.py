"""A note's history (``h`` on a feed row or in the trash): every version kms kept, who made it and how, the
diff of the highlighted one against the note now, and restoring it after a yes.

The same core as ``kms history`` and ``kms restore`` (``server.activity.note_history``, ``server.writes.undo.restore``):
the restore is the person's write, recorded and revertible, refused (``conflict``) when the note changed
since the diff was shown.
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
from server.activity import note_history
from server.errors import KmsError
from server.writes.undo import restore
from tui.screens.modals import YesNoScreen

if TYPE_CHECKING:
    from tui.app import KmsDashboard

HINT = "r restores the highlighted version (after a yes) · recorded as yours, `kms revert` takes it back"
MAX_DIFF_LINES = 400


def who_text(who: dict[str, Any]) -> Text:
    if who["by"] == "agent":
        return Text(f"{who['sessionId']} {who['how']}", style="cyan", no_wrap=True, overflow="ellipsis")
    if who["by"] == "person":
        return Text(f"you: {who['how']}", no_wrap=True)
    return Text("outside kms", style="dim italic")


def diff_text(diff: str) -> Text:
    out = Text()
    lines = diff.splitlines()
    for line in lines[:MAX_DIFF_LINES]:
        style = (
            "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "dim"
            if line.startswith("@@")
            else ""
        )
        out.append(line + "\n", style=style)
    if len(lines) > MAX_DIFF_LINES:
        out.append(f"… {len(lines) - MAX_DIFF_LINES} more lines (kms diff)\n", style="dim")
    return out


def load(conn: Any, ref: str, vault: str | None) -> tuple[note_history.Line, list[dict[str, Any]]]:
    line = note_history.find_line(conn, ref, vault)
    return line, note_history.versions(conn, line)


class ConfirmVersionRestore(YesNoScreen):
    """Restore one version, after a yes: where it goes and the change it makes."""

    BINDINGS = [Binding("y", "confirm", "Restore"), Binding("n,escape", "cancel", "Cancel")]

    def __init__(self, plan: dict[str, Any]) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        p = self.plan
        with Vertical(id="dialog", classes="wide") as box:
            box.border_title = f"Restore version {p['version']}"
            what = "bring it back" if not p["exists"] else "rewrite it"
            yield Label(Text(f"{p['vault']}/{p['path']}: {what} as version {p['version']}", style="bold"))
            with VerticalScroll(id="history-confirm-diff"):
                yield Static(diff_text(p["diff"]))
            with Horizontal(classes="buttons"):
                yield Button("Restore (y)", id="confirm", variant="warning")
                yield Button("Cancel (n)", id="cancel", variant="primary")
        yield Footer()


class HistoryScreen(Screen[None]):
    """The versions of one note, newest first; the diff of the highlighted one against the note now."""

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("r", "restore", "Restore"),
        Binding("g", "reload", "Reload"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self, ref: str, vault: str | None = None) -> None:
        super().__init__()
        self.ref, self.vault = ref, vault
        self.versions: list[dict[str, Any]] = []
        self.loaded = False
        self.shown: int | None = None  # the version whose diff is shown
        self.last_restore: dict[str, Any] | KmsError | None = None

    @property
    def kms(self) -> KmsDashboard:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("History", "bold"), f"  ·  {self.ref}"), id="history-title")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="history")
        with VerticalScroll(id="history-diff-box"):
            yield Static(Text(""), id="history-diff")
        yield Static(Text(HINT, style="dim"), id="history-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, width in (("#", 4), ("When", 8), ("Who", 24), ("Seen by", 8), ("Size", 7), ("Change", 7)):
            table.add_column(label, width=width, key=label)
        table.focus()
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    @work(group="history", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        try:
            line, rows = await self.kms.db(load, self.ref, self.vault)
        except KmsError as e:
            self.query_one("#history-status", Static).update(Text(e.message, style="red"))
            self.loaded = True
            return
        self.versions = rows
        gone = " (deleted)" if line.rid is None else ""
        title = Text.assemble(("History", "bold"), f"  ·  {line.vault}/{line.path}{gone}")
        self.query_one("#history-title", Static).update(title)
        now = self.kms.clock()
        table = self.query_one(DataTable)
        table.clear()
        for v in rows:
            change = "" if v["how"] in ("deleted", "moved") else f"{v['sizeChange']:+d}"
            table.add_row(
                Text(str(v["version"]), justify="right"),
                humanize.ago(v["at"], now),
                who_text(v["who"]),
                v["how"],
                Text(str(v["size"]), justify="right"),
                Text(change, justify="right"),
                key=str(v["version"]),
            )
        self.query_one("#history-status", Static).update(Text(f"{len(rows)} version(s) · {HINT}", style="dim"))
        self.loaded = True
        if rows:
            self.show_diff(rows[0]["version"])

    def selected(self) -> dict[str, Any] | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((v for v in self.versions if str(v["version"]) == key), None)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and int(event.row_key.value) != self.shown:
            self.show_diff(int(event.row_key.value))

    @work(group="history-diff", exclusive=True, exit_on_error=False)
    async def show_diff(self, number: int) -> None:
        self.shown = number
        box = self.query_one("#history-diff", Static)
        try:
            plan = await self.kms.db(restore.preview_restore, self.ref, number=number, vault=self.vault)
        except KmsError as e:
            box.update(Text(e.message, style="dim"))
            return
        box.update(Text("the note now is this version", style="dim") if plan["same"] else diff_text(plan["diff"]))

    def action_restore(self) -> None:
        version = self.selected()
        if version is not None:
            self.restore(version["version"])

    @work(group="history-restore", exclusive=True, exit_on_error=False)
    async def restore(self, number: int) -> None:
        try:
            plan = await self.kms.db(restore.preview_restore, self.ref, number=number, vault=self.vault)
        except KmsError as e:
            self.notify(e.message, title=f"Can't restore version {number}", severity="error", timeout=8)
            return
        if plan["same"]:
            self.notify(f"{plan['path']} already is version {number}.", title="Nothing to restore")
            return
        if not await self.app.push_screen_wait(ConfirmVersionRestore(plan)):
            return
        try:
            result = await self.kms.db(
                restore.restore, self.ref, number=number, expect=plan["expect"], vault=self.vault
            )
        except KmsError as e:
            self.last_restore = e
            self.notify(e.message, title=f"Can't restore version {number}", severity="error", timeout=8)
            return
        self.last_restore = result
        self.notify(
            f"{plan['vault']}/{plan['path']} is version {number} again (recorded as #{result['invocationId']}).",
            title="Restored",
        )
        self.reload()
