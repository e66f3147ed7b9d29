"""The pending pane: calls waiting for the person's approval, the exact diff of the selected one;
``a`` approves, ``x`` rejects (with an optional reason). Live: the dashboard forwards the poller's
``PendingChanged`` here, so a call staged by any server appears within a poll."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, Static

from tui.state import DashboardState
from tui.widgets.pending import PendingTable, diff_text

if TYPE_CHECKING:
    from tui.app import KmsDashboard


class PendingScreen(Screen[None]):
    """Review what agents want to write before it lands."""

    DEFAULT_CSS = """
    PendingScreen #pending-list { height: auto; max-height: 40%; }
    PendingScreen #pending-diff { height: 1fr; border: round $primary; padding: 0 1; }
    PendingScreen #pending-empty { padding: 1 2; }
    PendingScreen #pending-title { padding: 0 1; background: $boost; }
    """
    BINDINGS = [
        Binding("a", "approve", "Approve"),
        Binding("x", "reject", "Reject"),
        Binding("escape,p", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit", show=False),
    ]

    def __init__(self, state: DashboardState) -> None:
        super().__init__()
        self.state = state
        self.shown_id: int | None = None

    @property
    def kms(self) -> KmsDashboard:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(id="pending-title")
        yield Static("Nothing waits for your approval.", id="pending-empty")
        yield PendingTable(id="pending-list")
        with VerticalScroll(id="pending-diff") as box:
            box.border_title = "The change, exactly as it would land"
            yield Static(id="pending-diff-text")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.update_items()
        self.query_one(PendingTable).focus()
        self.set_interval(1.0, self._tick)  # "waiting" and "left" count on between the poller's messages

    def _tick(self) -> None:
        self.query_one(PendingTable).show(self.state.pending, self.state.clock())

    def update_items(self) -> None:
        """Re-render from the dashboard's state (called on every ``PendingChanged``)."""
        items = self.state.pending
        n = len(items)
        self.query_one("#pending-title", Static).update(
            Text.assemble(
                ("Waiting for your approval", "bold"),
                f" · {n} call{'s' if n != 1 else ''} · ",
                ("a", "bold"),
                " approve · ",
                ("x", "bold"),
                " reject · ",
                ("esc", "bold"),
                " back",
            )
        )
        table = self.query_one(PendingTable)
        table.show(items, self.state.clock())
        self.query_one("#pending-empty").display = not items
        table.display = bool(items)
        self.query_one("#pending-diff").display = bool(items)
        self._show_selected()

    @on(DataTable.RowHighlighted, "#pending-list")
    def _highlighted(self) -> None:
        self._show_selected()

    def _show_selected(self) -> None:
        sid = self.query_one(PendingTable).selected_id
        item = next((p for p in self.state.pending if p.id == sid), None)
        self.shown_id = item.id if item else None
        self.query_one("#pending-diff-text", Static).update(diff_text(item) if item else "")

    def action_approve(self) -> None:
        if self.shown_id is not None:
            self.kms.decide(self.shown_id, True, None)

    def action_reject(self) -> None:
        pid = self.shown_id
        if pid is None:
            return

        def reason_given(reason: str | None) -> None:
            if reason is not None:  # None: the person cancelled
                self.kms.decide(pid, False, reason)

        self.app.push_screen(ReasonScreen(pid), reason_given)


class ReasonScreen(ModalScreen[str | None]):
    """Why the change is rejected (optional; the agent is told): Enter rejects, Escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, pending_id: int) -> None:
        super().__init__()
        self.pending_id = pending_id

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = f"Reject #{self.pending_id}"
            yield Label(Text("Why? (optional; the agent is told). Enter rejects, Escape cancels."))
            yield Input(placeholder="reason", id="reject-reason")
            with Horizontal(classes="buttons"):
                yield Button("Reject", id="confirm", variant="error")
                yield Button("Cancel", id="cancel", variant="primary")

    @on(Input.Submitted, "#reject-reason")
    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        self.dismiss(self.query_one("#reject-reason", Input).value)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_mount(self, _event: Any = None) -> None:
        self.query_one("#reject-reason", Input).focus()
