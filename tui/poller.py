"""The live tail: one thread, one connection, cheap checks several times a second.

``PRAGMA data_version`` changes only when another connection commits, so an idle
dashboard costs one pragma per poll. When it moves, only rows above the last id
seen are fetched, and edits sessions made outside kms that became whole since (a
report or a version above the marks of ``server.activity.outside_feed``). Sessions are re-read on a change and once a
second anyway (their gauges decay and "live" turns "idle" with time, without any commit), and
the settings file is re-read when its mtime changes. Messages are produced only
when something differs from what was last sent, so widgets re-render rarely.

The class knows nothing about Textual workers: ``tui.app`` drives it from a thread
worker and posts what it returns, which also makes it testable on its own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import apsw
from textual.message import Message

from server.activity import approvals, feed, outside_feed
from server.config.settings import load_settings
from server.index.overview import Overview, overview
from server.store.db import connect
from tui.messages import (
    InvocationsArrived,
    OverviewChanged,
    OverwrittenChanged,
    PendingChanged,
    SessionsChanged,
    SettingsChanged,
)

TICK_S = 1.0


class Poller:
    def __init__(
        self,
        db_path: str | Path,
        *,
        clock: Callable[[], float],
        settings_path: Path,
        window: int = feed.FEED_WINDOW,
        ticker: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db_path = db_path
        self.clock = clock  # wall time for what is shown (frozen in snapshots)
        self.ticker = ticker  # paces the once-a-second refresh (tests advance it instead of sleeping)
        self.settings_path = settings_path
        self.window = window
        self.conn: apsw.Connection | None = None
        self.version = -1
        self.last_id = 0
        self.mark = outside_feed.Mark()
        self._last_tick = 0.0
        self._sessions: list[feed.SessionInfo] | None = None
        self._sessions_at = 0.0
        self._overview: Overview | None = None
        self._settings_mtime: float | None = -1.0
        self._overwritten: set[int] = set()
        self._pending: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # (waiting ids, asked in the host)

    def first(self) -> list[Message]:
        """Open the connection (in the calling thread) and return the initial picture."""
        conn = self.conn = connect(self.db_path)
        self.version = feed.data_version(conn)
        page = outside_feed.merged_page(conn, limit=self.window)
        self.last_id, self.mark = page.high_water, page.mark
        msgs: list[Message] = [
            InvocationsArrived(page.rows, initial=True, more=page.more, reverted=feed.reverted_ids(conn))
        ]
        return msgs + self._flags() + self._refresh(changed=True, tick=True)

    def poll(self) -> list[Message]:
        """One cheap check; messages for whatever changed."""
        assert self.conn is not None, "call first() before poll()"
        msgs: list[Message] = []
        version = feed.data_version(self.conn)
        changed = version != self.version
        if changed:
            self.version = version
            while True:
                new = feed.feed_since(self.conn, self.last_id, self.window)
                if new:
                    self.last_id = new[-1]["id"]
                    msgs.append(InvocationsArrived(new))
                if len(new) < self.window:
                    break
            more = True
            while more:
                outside, self.mark, more = outside_feed.since(self.conn, self.mark, self.window)
                if outside:
                    msgs.append(InvocationsArrived(outside))
            msgs.extend(self._flags())
        tick = self.ticker() - self._last_tick >= TICK_S
        return msgs + self._refresh(changed, tick)

    def _flags(self) -> list[Message]:
        """A message when the watcher flagged (or cleared) an overwritten write since the last look."""
        assert self.conn is not None
        ids = feed.overwritten_ids(self.conn)
        if ids == self._overwritten:
            return []
        self._overwritten = ids
        return [OverwrittenChanged(ids)]

    def _refresh(self, changed: bool, tick: bool) -> list[Message]:
        assert self.conn is not None
        msgs: list[Message] = []
        if tick:
            self._last_tick = self.ticker()
        if changed:
            ov = overview(self.conn)
            if ov != self._overview:
                self._overview = ov
                msgs.append(OverviewChanged(ov))
        if changed or tick:  # (on a tick too: a waiting call past its time leaves the list)
            msgs.extend(self._pending_calls())
            now = self.clock()
            sessions = feed.session_overview(self.conn, now)
            counting = any(s.gauge.limited for s in sessions) and int(now) != int(self._sessions_at)
            if sessions != self._sessions or counting:  # a limited gauge counts down each second
                self._sessions, self._sessions_at = sessions, now
                msgs.append(SessionsChanged(sessions, now))
        if tick:
            msgs.extend(self._settings())
        return msgs

    def _pending_calls(self) -> list[Message]:
        """A message when the calls waiting for approval changed (staged, decided, expired)."""
        assert self.conn is not None
        now = self.clock()
        key = (approvals.open_ids(self.conn, now=now), approvals.asking_ids(self.conn))
        if key == self._pending:
            return []
        self._pending = key
        return [PendingChanged(approvals.list_pending(self.conn, now=now), approvals.latest_id(self.conn))]

    def _settings(self) -> list[Message]:
        try:
            mtime: float | None = os.stat(self.settings_path).st_mtime
        except OSError:
            mtime = None
        if mtime == self._settings_mtime:
            return []
        self._settings_mtime = mtime
        has_vault = bool(self._overview and self._overview.vaults)
        return [SettingsChanged(load_settings(self.settings_path, has_vault=has_vault))]

    def settings_changed(self) -> None:
        """Force a settings re-read on the next tick (the settings screen just saved)."""
        self._settings_mtime = -1.0

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
