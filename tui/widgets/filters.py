"""Search box and the session / tool / status filters above the feed (compact, one line)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Select

from server.activity.feed import STATUSES, TOOLS, FeedFilter
from tui import format as fmt


class FilterBar(Horizontal):
    """Changing any control posts the widgets' own Changed messages; the screen reloads the feed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._sessions: list[str] = []
        self._tools: list[str] = sorted(TOOLS)

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search provenance  (/)", id="search", compact=True)
        yield Select[str]([], prompt="any session", id="f-session", compact=True)
        yield Select[str](self._tool_options(), prompt="any tool", id="f-tool", compact=True)
        yield Select[str]([(fmt.status_text(s), s) for s in STATUSES], prompt="any status", id="f-status", compact=True)

    def _tool_options(self) -> list[tuple[str, str]]:
        return [(fmt.short_tool(t), t) for t in self._tools]

    @staticmethod
    def _replace_options(select: Select[str], options: list[tuple[Any, str]]) -> None:
        """Replace options without losing or re-announcing the current choice."""
        current = select.value
        with select.prevent(Select.Changed):
            select.set_options(options)
            if current is not Select.NULL and current in [v for _label, v in options]:
                select.value = current

    def set_sessions(self, session_ids: Iterable[str]) -> None:
        """Offer these sessions (plus the one chosen, should it have dropped off the list)."""
        current = self.query_one("#f-session", Select).value
        ids = list(dict.fromkeys([*session_ids, *([str(current)] if current is not Select.NULL else [])]))
        if ids != self._sessions:
            self._sessions = ids
            self._replace_options(self.query_one("#f-session", Select), [(s, s) for s in ids])

    def set_tools(self, tools: Iterable[str]) -> None:
        merged = sorted({*self._tools, *tools})
        if merged != self._tools:
            self._tools = merged
            self._replace_options(self.query_one("#f-tool", Select), self._tool_options())

    @property
    def filter(self) -> FeedFilter:
        def value(selector: str) -> str | None:
            v = self.query_one(selector, Select).value
            return None if v is Select.NULL else str(v)

        return FeedFilter(value("#f-session"), value("#f-tool"), value("#f-status"))

    @property
    def search_text(self) -> str:
        return self.query_one("#search", Input).value.strip()

    def set_session(self, session_id: str | None) -> None:
        """Narrow the feed to one session (None: any)."""
        select = self.query_one("#f-session", Select)
        if session_id is None:
            select.clear()
            return
        if session_id not in self._sessions:
            self.set_sessions([*self._sessions, session_id])
        select.value = session_id

    def set_status(self, status: str | None) -> None:
        select = self.query_one("#f-status", Select)
        if status is None:
            select.clear()
        else:
            select.value = status

    def clear_all(self) -> None:
        self.query_one("#search", Input).value = ""
        for select in self.query(Select):
            select.clear()
