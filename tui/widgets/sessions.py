"""Sessions with their write gauges: this minute vs the per-minute limit, the total vs
the per-session limit, and when a limited session may write again."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from server import humanize
from server.activity.feed import SessionInfo
from tui import format as fmt
from tui.state import DashboardState

# fixed widths: a gauge growing from 9/10 to 10/10 must not re-flow the table
# (at 80 columns the table fits with its scrollbar)
COLUMNS = (
    ("Session", "id", 13),
    ("Kind", "kind", 8),
    ("State", "state", 9),
    ("This minute", "minute", 11),
    ("Total", "total", 8),
    ("Can write", "next", 9),
    ("Start", "started", 5),
)


CONTROL_STYLE = {"paused": ("⏸", "bold yellow"), "revoked": ("⊘", "bold red")}


class SessionsTable(DataTable[Any]):
    """One row per session, keyed by session id; updated in place so the cursor stays put. With the table
    focused, the person pauses or resumes (``P``), revokes (``V``) or undoes (``U``) the highlighted session."""

    BINDINGS = [
        Binding("P", "control('pause')", "Pause/resume"),
        Binding("V", "control('revoke')", "Revoke"),
        Binding("U", "control('undo')", "Undo session"),
    ]

    def __init__(self, state: DashboardState, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.state = state
        self.border_title = "Sessions"

    def on_mount(self) -> None:
        for label, key, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def _cells(self, s: SessionInfo, now: float) -> tuple[Any, ...]:
        symbol, style = fmt.STATE_STYLE.get(s.state, ("?", ""))
        failed = s.state == "ended" and s.exit_code not in (None, 0)
        state = f"{s.state} {s.exit_code}" if failed else s.state
        if s.control in CONTROL_STYLE:  # the person's control says more than live/idle
            (symbol, style), state = CONTROL_STYLE[s.control], s.control
        g = s.gauge
        cells = (
            Text(s.id),
            Text(s.who),  # its token's label (host:cursor), else its kind
            Text(f"{symbol} {state}", style=style),
            fmt.minute_gauge(g),
            fmt.total_gauge(g),
            fmt.next_write(g, now) if g.known else Text("-", style="dim"),  # no limits on record: no writes
            Text(humanize.short_time(s.started_at, now)),
        )
        for cell in cells:
            cell.no_wrap, cell.overflow = True, "ellipsis"
        return cells

    def show(self, sessions: list[SessionInfo], now: float) -> None:
        """Update rows in place (add new, drop vanished) and keep the highlighted session."""
        selected = self.selected_id
        wanted = {s.id: s for s in sessions}
        for key in list(self.rows):
            if key.value not in wanted:
                self.remove_row(key)
        keys = [c.key for c in self.ordered_columns]
        for s in sessions:
            cells = self._cells(s, now)
            if s.id in self.rows:
                for col, value in zip(keys, cells, strict=True):
                    if self.get_cell(s.id, col) != value:
                        self.update_cell(s.id, col, value)
            else:
                self.add_row(*cells, key=s.id)
        order = {s.id: i for i, s in enumerate(sessions)}
        self.sort("id", key=lambda cell: order.get(cell.plain, len(order)))
        if selected in wanted:
            self.move_cursor(row=self.get_row_index(selected), animate=False, scroll=False)

    def action_control(self, what: str) -> None:
        sid = self.selected_id
        if sid is None:
            self.notify("No session selected.", severity="warning")
            return
        self.app.session_control(sid, what)  # type: ignore[attr-defined]

    @property
    def selected_id(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001 - no cursor row
            return None
