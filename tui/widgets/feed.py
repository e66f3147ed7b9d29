"""The provenance feed: a DataTable holding a bounded window of rows, newest first.

DataTable has no "insert at top", so live rows are appended and the table re-sorted
by time (a few thousand rows sort in a millisecond or two); the cursor stays on the row
the person was looking at. Rows are the kms calls (keyed by invocation id) and the edits a
session made outside kms (``server.activity.outside_feed``, keyed ``o`` + the report's id).

Older rows are paged in at the bottom when the cursor or the scroll position nears the
end, and the window is capped so a dashboard left open for days stays small.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

from server import humanize
from server.activity.outside_feed import is_outside, row_key
from tui import format as fmt
from tui.state import DashboardState

MAX_ROWS = 3000
FIRST_PAINT = 60  # rows added at once: more than any screen shows
CHUNK = 150  # then this many per refresh
NOTE_MIN, NOTE_MAX = 12, 60
NARROW = 90  # below this table width session ids are shortened to their first 8 characters


class OrderCell(Text):
    """The ``#`` cell, carrying where its row sorts: by time, then by its own id."""

    order: tuple[float, int, int] = (0.0, 0, 0)


def row_order(r: dict[str, Any]) -> tuple[float, int, int]:
    return (r["at"], 1, r["fid"]) if is_outside(r) else (r["at"], 0, r["id"])


def column_widths(table_width: int) -> dict[str, int]:
    """Fixed widths (so new rows never make the table scroll sideways); the note gets the rest."""
    widths = {
        "id": 5,
        "time": 11,
        "session": 13 if table_width >= NARROW else 9,
        "tool": fmt.TOOL_CELLS,
        "status": 10,
        "lines": 4,
    }
    spare = table_width - sum(widths.values()) - 2 * (len(widths) + 1) - 2  # cell padding, scrollbar
    widths["note"] = max(NOTE_MIN, min(NOTE_MAX, spare))
    return widths


class FeedTable(DataTable[Any]):
    """Rows keyed by ``row_key``: the invocation id as a string, or ``o`` + the report id of an outside edit."""

    BINDINGS = [  # the table never scrolls sideways, so Home/End mean newest/oldest
        Binding("home", "scroll_top", "Newest", show=False),
        Binding("end", "scroll_bottom", "Oldest", show=False),
    ]

    class NeedOlder(Message):
        """The person reached the end of the window and older rows exist."""

    def __init__(self, state: DashboardState, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.state = state
        self.rows_by_key: dict[str, dict[str, Any]] = {}  # the rows in the table
        self._pending: list[dict[str, Any]] = []  # rows still to be added (see _append)
        self.more = False
        self.widths = column_widths(80)
        self.border_title = "Agent writes"

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for label, key in (
            ("#", "id"),
            ("Time", "time"),
            ("Session", "session"),
            ("Tool", "tool"),
            ("Note", "note"),
            ("Status", "status"),
            ("+Ln", "lines"),
        ):
            self.add_column(label, key=key, width=self.widths[key])

    def on_resize(self) -> None:
        widths = column_widths(self.size.width)
        if widths != self.widths:
            self.widths = widths
            rows = self.newest_first()
            selected = self.selected_key
            self.clear(columns=True)
            self.rows_by_key = {}
            self._pending = []
            self._add_columns()
            self._append(rows)
            self.select(selected)

    # ----- contents -----------------------------------------------------------------------------

    def _cells(self, r: dict[str, Any]) -> tuple[Any, ...]:
        """Every cell a Text: a str would be parsed as markup, which costs more and may misread a title."""
        if is_outside(r):
            first = OrderCell("↗", justify="right", style="magenta")
            first.order = row_order(r)
            return (
                first,
                Text(humanize.clock_time(r["at"], self.state.clock())),
                Text(r["session_id"], no_wrap=True, overflow="ellipsis"),
                Text(r["host_tool"][:6], style="italic magenta"),
                Text(fmt.note_label(r), no_wrap=True, overflow="ellipsis"),
                fmt.outside_status(r["size_change"]),
                Text(""),
            )
        first = OrderCell(str(r["id"]), justify="right")
        first.order = row_order(r)
        reverted = r["id"] in self.state.reverted
        lines = r.get("lines_added") or 0
        return (
            first,
            Text(humanize.clock_time(r["at"], self.state.clock())),
            Text(r["session_id"], no_wrap=True, overflow="ellipsis"),
            Text(fmt.short_tool(r["tool"]), style="italic" if r.get("actor") == "person" else ""),
            Text(fmt.note_label(r), no_wrap=True, overflow="ellipsis"),
            fmt.status_text(r["status"], reverted, r["id"] in self.state.overwritten),
            Text(f"{lines:+d}" if lines else "", justify="right"),
        )

    def _append(self, rows: list[dict[str, Any]]) -> None:
        """Add rows at the bottom: a screenful now, the rest in chunks after the next refreshes,
        so the first rows show without waiting for the whole window to be laid out."""
        fresh = [r for r in rows if row_key(r) not in self.rows_by_key]
        if self._pending:
            self._pending.extend(fresh)
            return
        room = max(0, FIRST_PAINT - self.row_count) if self.row_count < FIRST_PAINT else CHUNK
        self._add(fresh[:room])
        if fresh[room:]:
            self._pending = fresh[room:]
            self.call_after_refresh(self._drain)

    def _drain(self) -> None:
        chunk, self._pending = self._pending[:CHUNK], self._pending[CHUNK:]
        self._add(chunk)
        if self._pending:
            self.call_after_refresh(self._drain)
        elif self.cursor_row >= self.row_count - 3:
            self._maybe_need_older()

    def _add(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            key = row_key(r)
            if key not in self.rows_by_key:
                self.rows_by_key[key] = r
                self.add_row(*self._cells(r), key=key)

    @property
    def rows_by_id(self) -> dict[int, dict[str, Any]]:
        """The kms calls in the table, by invocation id."""
        return {r["id"]: r for r in self.rows_by_key.values() if not is_outside(r)}

    def oldest_ids(self) -> tuple[int | None, int | None]:
        """The oldest invocation id and report id held (or pending): where paging back goes on from."""
        held = [*self.rows_by_key.values(), *self._pending]
        calls = [r["id"] for r in held if not is_outside(r)]
        reports = [r["fid"] for r in held if is_outside(r)]
        return min(calls, default=None), min(reports, default=None)

    def newest_first(self) -> list[dict[str, Any]]:
        everything = {**self.rows_by_key, **{row_key(r): r for r in self._pending}}
        return sorted(everything.values(), key=row_order, reverse=True)

    def reset(self, rows: list[dict[str, Any]], more: bool) -> None:
        """Replace the window (rows newest first)."""
        self.clear()
        self.rows_by_key = {}
        self._pending = []
        self.more = more
        self._append(rows)
        if rows:
            self.move_cursor(row=0, animate=False)

    def add_new(self, rows: list[dict[str, Any]]) -> int:
        """Put live rows on top; the cursor stays on the same row. Returns rows added."""
        fresh = [r for r in rows if row_key(r) not in self.rows_by_key]
        if not fresh:
            return 0
        selected = self.selected_key
        self._add(fresh)
        self.sort("id", key=lambda cell: cell.order, reverse=True)
        self._cap()
        if selected is not None:
            self.select(selected, scroll=False)
        return len(fresh)

    def add_older(self, rows: list[dict[str, Any]], more: bool) -> None:
        """Older rows (newest first) go at the bottom."""
        self.more = more
        self._append(rows)

    def _cap(self) -> None:
        if len(self.rows_by_key) <= MAX_ROWS:
            return
        for old in sorted(self.rows_by_key.values(), key=row_order)[: len(self.rows_by_key) - MAX_ROWS]:
            key = row_key(old)
            del self.rows_by_key[key]
            self.remove_row(key)
        self.more = True

    def refresh_statuses(self, ids: list[int]) -> None:
        """Re-render the status cell of rows whose reverted or overwritten state changed."""
        for i in ids:
            r = self.rows_by_key.get(str(i))
            if r is not None:
                self.update_cell(
                    str(i),
                    "status",
                    fmt.status_text(r["status"], i in self.state.reverted, i in self.state.overwritten),
                )

    # ----- selection ----------------------------------------------------------------------------

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - an empty or shrinking table has no cursor row
            return None
        return key.value

    @property
    def selected_id(self) -> int | None:
        """The selected kms call's invocation id (None: nothing, or an edit made outside kms)."""
        key = self.selected_key
        return int(key) if key is not None and key.isdigit() else None

    @property
    def selected_row(self) -> dict[str, Any] | None:
        key = self.selected_key
        return None if key is None else self.rows_by_key.get(key)

    def select(self, key: int | str | None, *, scroll: bool = True) -> None:
        if key is None:
            return
        try:
            index = self.get_row_index(str(key))
        except RowDoesNotExist:
            return
        self.move_cursor(row=index, animate=False, scroll=scroll)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= self.row_count - 3:
            self._maybe_need_older()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new >= self.max_scroll_y - 2:
            self._maybe_need_older()

    @property
    def filling(self) -> bool:
        """Rows of the window are still being added."""
        return bool(self._pending)

    def _maybe_need_older(self) -> None:
        if self.more and self.row_count and not self._pending:
            self.post_message(self.NeedOlder())
