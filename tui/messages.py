"""Messages the poller thread posts to the dashboard: the UI never queries on its own
schedule, it reacts to these (posting is thread-safe in Textual)."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from server.activity.approvals import Pending
from server.activity.feed import SessionInfo
from server.config.settings import Settings
from server.index.overview import Overview


class InvocationsArrived(Message):
    """New feed rows, oldest first; ``initial`` marks the first window (newest first). Rows are kms calls and
    edits sessions made outside kms (``server.activity.outside_feed``)."""

    def __init__(
        self,
        rows: list[dict[str, Any]],
        *,
        initial: bool = False,
        more: bool = False,
        reverted: dict[int, int] | None = None,
    ) -> None:
        super().__init__()
        self.rows = rows
        self.initial = initial
        self.more = more
        self.reverted = reverted or {}


class OverwrittenChanged(Message):
    """The set of agent writes a later save dropped changed (the watcher flags them after the fact)."""

    def __init__(self, ids: set[int]) -> None:
        super().__init__()
        self.ids = ids


class SessionsChanged(Message):
    """The session list, their states or their write gauges changed."""

    def __init__(self, sessions: list[SessionInfo], now: float) -> None:
        super().__init__()
        self.sessions = sessions
        self.now = now


class OverviewChanged(Message):
    """Vaults, note count or last index time changed (header)."""

    def __init__(self, overview: Overview) -> None:
        super().__init__()
        self.overview = overview


class SettingsChanged(Message):
    """The settings file changed (header flags and allowlist)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings


class PendingChanged(Message):
    """The write calls waiting for the person's approval changed (``newest``: the newest staged id ever)."""

    def __init__(self, items: list[Pending], newest: int) -> None:
        super().__init__()
        self.items = items
        self.newest = newest
