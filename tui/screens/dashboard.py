"""The main screen: header, sessions with gauges, filters + search, the feed, the detail pane.

It reacts to the poller's messages and to the person; anything that needs the
database runs in a worker (``app.db``), so the screen never waits on SQLite.
At 80 columns the detail pane sits under the feed; from 120 columns beside it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Select

from server.activity import feed, outside_feed
from server.activity.feed import FeedFilter
from tui.messages import (
    InvocationsArrived,
    OverviewChanged,
    OverwrittenChanged,
    PendingChanged,
    SessionsChanged,
    SettingsChanged,
)
from tui.screens.pending import PendingScreen
from tui.state import DashboardState
from tui.widgets.detail import DetailView
from tui.widgets.feed import FeedTable
from tui.widgets.filters import FilterBar
from tui.widgets.header import TopBar
from tui.widgets.pending import PendingBadge
from tui.widgets.sessions import SessionsTable

if TYPE_CHECKING:
    from tui.app import KmsDashboard

TAIL_MEMORY = 2000  # live rows kept to merge into a feed reloaded while they arrived


class DashboardScreen(Screen[None]):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    AUTO_FOCUS = "#feed"
    # The footer shows these in order and cuts what does not fit at 80 columns: Quit and Help first, so
    # they never go; everything else is also in Help (?) and the command palette (^p).
    BINDINGS = [
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
        Binding("slash", "focus_search", "Search", key_display="/"),
        Binding("u", "revert", "Revert"),
        Binding("o", "open_note", "Open"),
        Binding("e", "edit_note", "Edit", show=False),
        Binding("r", "reads", "Reads"),
        Binding("x", "clear_filters", "Clear"),
        Binding("s", "app.settings", "Settings"),
        Binding("t", "app.trash", "Trash", show=False),
        Binding("c", "app.conflicts", "Conflicts", show=False),  # the top bar's ⚠ says when one is open
        Binding("h", "history", "History", show=False),
        Binding("k", "app.service", "Service", show=False),
        Binding("p", "app.pending", "Pending", show=False),  # the badge says so when something waits
        Binding("l", "load_older", "Older rows", show=False),
        Binding("1", "focus('#sessions')", "Sessions", show=False),
        Binding("2", "focus('#feed')", "Feed", show=False),
        Binding("3", "focus('#detail')", "Detail", show=False),
        Binding("escape", "leave_search", "Back", show=False),
    ]

    def __init__(self, state: DashboardState) -> None:
        super().__init__()
        self.state = state
        self.applied: tuple[FeedFilter, str] = (FeedFilter(), "")
        self.tail: deque[dict[str, Any]] = deque(maxlen=TAIL_MEMORY)
        self.paused_new = 0  # live rows not shown while search results are
        self.loading_older = False
        self.detail_id: int | None = None  # the call the detail pane shows
        self.detail_key: str | None = None  # the row it shows (a call's id, or an edit made outside kms)

    @property
    def kms(self) -> KmsDashboard:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield TopBar(self.state, id="topbar")
        yield PendingBadge(id="pending-badge")
        yield SessionsTable(self.state, id="sessions")
        with Horizontal(id="main"):
            with Vertical(id="feedcol"):
                yield FilterBar(id="filters")
                yield FeedTable(self.state, id="feed")
            yield DetailView(id="detail")
        yield Footer(compact=True)

    @property
    def feed(self) -> FeedTable:
        return self.query_one(FeedTable)

    @property
    def filters(self) -> FilterBar:
        return self.query_one(FilterBar)

    # ----- poller messages ----------------------------------------------------------------------

    def on_invocations_arrived(self, msg: InvocationsArrived) -> None:
        self.state.note_rows(msg.rows, live=not msg.initial)
        self.filters.set_tools(self.state.tools_seen)
        if msg.initial:
            self.state.reverted.update(msg.reverted)
            self.feed.reset(msg.rows, msg.more)
            self.state.loaded = True
            self._subtitle()
            return
        self.tail.extend(msg.rows)
        targets = [r["reverts_id"] for r in msg.rows if r.get("reverts_id") and r["status"] == "success"]
        flt, query = self.applied
        if query:
            self.paused_new += sum(1 for r in msg.rows if flt.matches(r))
        else:
            self.feed.add_new([r for r in msg.rows if flt.matches(r)])
        self.feed.refresh_statuses(targets)
        if self.detail_id in targets:
            self.load_detail(self.detail_id)
        self._subtitle()

    def on_overwritten_changed(self, msg: OverwrittenChanged) -> None:
        changed = msg.ids ^ self.state.overwritten
        self.state.overwritten = set(msg.ids)
        self.feed.refresh_statuses(sorted(changed))
        if self.detail_id in changed:
            self.load_detail(self.detail_id)

    def on_sessions_changed(self, msg: SessionsChanged) -> None:
        self.state.sessions, self.state.sessions_at = msg.sessions, msg.now
        self.query_one(SessionsTable).show(msg.sessions, msg.now)
        self.filters.set_sessions([s.id for s in msg.sessions])

    def on_pending_changed(self, msg: PendingChanged) -> None:
        """Calls waiting for approval: the badge, the pending pane if open, the bell for a new one."""
        # once per call; a call the agent's host is asking the person about (write.approval_channel = host) rings
        # only if the host stops asking without a decision
        due = {p.id for p in msg.items if not p.asking_host} - self.state.pending_rung
        self.state.pending = msg.items
        self.state.pending_rung |= due
        self.query_one(PendingBadge).show(len(msg.items))
        if due:
            self.state.bells += 1
            self.app.bell()
        for screen in self.app.screen_stack:
            if isinstance(screen, PendingScreen):
                screen.update_items()

    def on_overview_changed(self, msg: OverviewChanged) -> None:
        self.state.overview = msg.overview
        self.query_one(TopBar).show()

    def on_settings_changed(self, msg: SettingsChanged) -> None:
        self.state.settings = msg.settings
        self.query_one(TopBar).show()

    def _subtitle(self) -> None:
        flt, query = self.applied
        parts = [f"{self.feed.row_count} rows" + ("+" if self.feed.more else "")]
        if query:
            parts.append(f"search {query!r}")
            parts.append(f"live tail paused ({self.paused_new} new)" if self.paused_new else "live tail paused")
        else:
            parts.append("live")
        parts += [f"{k}={v}" for k, v in (("session", flt.session), ("tool", flt.tool), ("status", flt.status)) if v]
        self.feed.border_subtitle = " · ".join(parts)

    # ----- filters and search -------------------------------------------------------------------

    @on(Select.Changed)
    def _filter_changed(self) -> None:
        self.reload_feed()

    @on(Input.Submitted, "#search")
    def _search_submitted(self) -> None:
        self.reload_feed()
        self.feed.focus()

    @on(Input.Changed, "#search")
    def _search_typed(self) -> None:
        self.reload_feed(debounce=0.3)

    def reload_feed(self, debounce: float = 0.0) -> None:
        wanted = (self.filters.filter, self.filters.search_text)
        if wanted == self.applied:
            self.workers.cancel_group(self, "feed")  # back to what is shown: drop a pending reload
        elif self.state.loaded:
            self._reload(wanted, debounce)

    @work(exclusive=True, group="feed", exit_on_error=False)
    async def _reload(self, wanted: tuple[FeedFilter, str], debounce: float) -> None:
        """Newest window for the filters (or search results); tail rows that arrived meanwhile merged."""
        if debounce:
            await asyncio.sleep(debounce)
        flt, query = wanted
        if query:
            rows = await self.kms.db(feed.search_feed, query, flt)
            page = outside_feed.MergedPage(rows, 0, outside_feed.Mark(), False)
        else:
            page = await self.kms.db(outside_feed.merged_page, flt)
        self.applied = wanted
        self.paused_new = 0
        self.feed.reset(page.rows, page.more)
        if not query:  # (an edit made outside kms already shown has its key: the table keeps one)
            self.feed.add_new(
                [r for r in self.tail if (outside_feed.is_outside(r) or r["id"] > page.high_water) and flt.matches(r)]
            )
        self._subtitle()
        if not page.rows:
            self.query_one(DetailView).show_message("No matching rows.")

    def on_feed_table_need_older(self) -> None:
        self.action_load_older()

    def action_load_older(self) -> None:
        if self.feed.more and not self.loading_older and not self.applied[1]:
            self.loading_older = True
            self._load_older()

    @work(group="older", exit_on_error=False)
    async def _load_older(self) -> None:
        try:
            oldest, oldest_report = self.feed.oldest_ids()
            page = await self.kms.db(
                outside_feed.merged_page, self.applied[0], before_id=oldest, before_report=oldest_report
            )
            self.feed.add_older(page.rows, page.more)
            self._subtitle()
        finally:
            self.loading_older = False

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_leave_search(self) -> None:
        if self.focused is self.query_one("#search", Input):
            self.feed.focus()

    def action_clear_filters(self) -> None:
        self.filters.clear_all()
        self.reload_feed()

    # ----- selection and detail -----------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#feed")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is not None and key != self.detail_key:
            if key.isdigit():
                self.load_detail(int(key))
            else:
                self.load_outside_detail(key)

    @on(DataTable.RowSelected, "#feed")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None and event.row_key.value.isdigit():
            self.kms.show_invocation(int(event.row_key.value))

    @on(DataTable.RowSelected, "#sessions")
    def _session_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a session narrows the feed to it (Enter again: all sessions)."""
        sid = event.row_key.value
        self.filters.set_session(None if self.applied[0].session == sid else sid)

    @work(exclusive=True, group="detail", exit_on_error=False)
    async def load_detail(self, invocation_id: int) -> None:
        self.detail_id, self.detail_key = invocation_id, str(invocation_id)
        detail = await self.kms.db(feed.invocation_detail, invocation_id)
        self.query_one(DetailView).show(detail, self.state.clock())

    @work(exclusive=True, group="detail", exit_on_error=False)
    async def load_outside_detail(self, key: str) -> None:
        """An edit a session made outside kms: its version's diff against the one before."""
        self.detail_id, self.detail_key = None, key
        row = self.feed.rows_by_key.get(key)
        if row is None:
            return
        detail = await self.kms.db(outside_feed.detail, row["fid"])
        self.query_one(DetailView).show_outside(detail, self.state.clock())

    # ----- actions on the selection -------------------------------------------------------------

    def _selected(self) -> int | None:
        sid = self.feed.selected_id
        if sid is None:
            self.notify("Select a row in the feed first.", severity="warning")
        return sid

    def _outside_row(self) -> dict[str, Any] | None:
        row = self.feed.selected_row
        return row if row is not None and outside_feed.is_outside(row) else None

    def action_revert(self) -> None:
        """A kms call: its revert. An edit made outside kms has none of its own: the session's undo (a preview
        first), which restores that note too (a single version: ``h``, the note's history)."""
        if (row := self._outside_row()) is not None:
            self.kms.session_control(row["session_id"], "undo")
        elif (sid := self._selected()) is not None:
            self.kms.review_revert(sid)

    def action_history(self) -> None:
        """The history of the selected row's note (the one the detail pane shows)."""
        if (row := self._outside_row()) is not None:
            self.kms.show_history(row["note_id"])
            return
        if (sid := self._selected()) is None or (row := self.feed.selected_row) is None:
            return
        if row.get("note_id"):
            self.kms.show_history(row["note_id"])
        elif row.get("path"):
            self.kms.show_history(row["path"], row.get("vault"))
        else:
            self.notify(f"#{sid} names no note.", severity="warning")

    def action_open_note(self) -> None:
        """The selected row's note; with the sessions focused, the highlighted session's session note."""
        sessions = self.query_one(SessionsTable)
        if self.focused is sessions and (session_id := sessions.selected_id) is not None:
            self.kms.open_session_note(session_id)
        elif (row := self._outside_row()) is not None:
            self.kms.action_open_read_note(row["note_id"])
        elif (sid := self._selected()) is not None:
            self.kms.open_note(sid)

    def action_edit_note(self) -> None:
        if self._outside_row() is not None:
            self.notify("o shows the note; e edits the note of a kms call.", severity="warning")
        elif (sid := self._selected()) is not None:
            self.kms.edit_note(sid)

    def action_reads(self) -> None:
        """Reads of the highlighted session (sessions focused) or of the selected row's session."""
        sessions = self.query_one(SessionsTable)
        sid = sessions.selected_id if self.focused is sessions else None
        if sid is None and (row := self.feed.selected_row) is not None:
            sid = row["session_id"]
        sid = sid or sessions.selected_id
        if sid is None:
            self.notify("No session selected.", severity="warning")
            return
        self.kms.show_reads(sid)
