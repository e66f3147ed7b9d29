"""One invocation in full (Enter on a feed row): room for the whole context at 80×24."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer

from server.activity import feed
from tui.state import DashboardState
from tui.widgets.detail import DetailView
from tui.widgets.header import TopBar

if TYPE_CHECKING:
    from tui.app import KmsDashboard


class InvocationScreen(Screen[None]):
    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("u", "revert", "Revert"),
        Binding("o", "open_note", "Open note"),
        Binding("e", "edit_note", "Edit in $EDITOR"),
        Binding("r", "reads", "Reads"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self, state: DashboardState, invocation_id: int) -> None:
        super().__init__()
        self.state = state
        self.invocation_id = invocation_id

    @property
    def kms(self) -> KmsDashboard:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield TopBar(self.state, id="topbar")
        yield DetailView(id="detail-full")
        yield Footer()

    async def on_mount(self) -> None:
        self.query_one(TopBar).show()
        self.query_one(DetailView).focus()
        await self.reload()

    async def reload(self) -> None:
        detail = await self.kms.db(feed.invocation_detail, self.invocation_id)
        self.query_one(DetailView).show(detail, self.state.clock())

    def action_revert(self) -> None:
        self.kms.review_revert(self.invocation_id)

    def action_open_note(self) -> None:
        self.kms.open_note(self.invocation_id)

    def action_edit_note(self) -> None:
        self.kms.edit_note(self.invocation_id)

    def action_reads(self) -> None:
        view = self.query_one(DetailView)
        if view.detail is not None:
            self.kms.show_reads(view.detail.invocation["session_id"])
