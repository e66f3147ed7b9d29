"""Per-session write limits: a sliding one-minute window and a per-session total.

The counters live in the database (``write_events``, ``write_counters``, m002),
not in memory, for two reasons: several server processes may serve one session
id, and the dashboard (another process) shows them live. Check and record happen
in one ``BEGIN IMMEDIATE`` transaction, so a flood from many threads or processes
admits exactly the allowed number of writes.

A slot is taken *before* any file is touched; when the write then fails (bad
input, conflict, ...) the caller gives the slot back with ``release`` so only
writes that happened count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import apsw

from server.errors import KmsError
from server.store.db import rows, scalar, write_tx

DEFAULT_PER_MINUTE = 10
DEFAULT_PER_SESSION = 200
WINDOW_S = 60.0


@dataclass(frozen=True)
class Slot:
    """A taken write slot (the ``write_events`` rowid), to give back if the write fails."""

    session_id: str
    event_id: int
    at: float


class RateLimiter:
    """Sliding-window limiter; ``None`` for a limit means unlimited."""

    def __init__(
        self,
        per_minute: int | None = DEFAULT_PER_MINUTE,
        per_session: int | None = DEFAULT_PER_SESSION,
        *,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.per_minute = per_minute
        self.per_session = per_session
        self.window_s = window_s
        self.clock = clock  # wall clock: the counters are shared between processes

    @classmethod
    def from_settings(cls, settings: Any) -> RateLimiter:
        """From ``server.config.settings`` (``write.per_minute``, ``write.per_session``)."""
        return cls(per_minute=settings.get("write.per_minute"), per_session=settings.get("write.per_session"))

    def acquire(self, conn: apsw.Connection, session_id: str) -> Slot:
        """Take one write slot or raise ``rate-limited`` (with ``retryAfterMs``)."""
        with write_tx(conn):
            now = self.clock()
            since = now - self.window_s
            conn.execute("DELETE FROM write_events WHERE session_id = ? AND at <= ?", (session_id, since))
            window = scalar(conn, "SELECT count(*) FROM write_events WHERE session_id = ?", (session_id,))
            total = scalar(conn, "SELECT total FROM write_counters WHERE session_id = ?", (session_id,)) or 0
            oldest = scalar(conn, "SELECT min(at) FROM write_events WHERE session_id = ?", (session_id,))
            if self.per_session is not None and total >= self.per_session:
                self._store(conn, session_id, window, total, oldest, now)
                raise KmsError(
                    "rate-limited",
                    f"this session has used all {self.per_session} writes it may make; start a new session",
                    retryAfterMs=None,
                    limit="per-session",
                    perSession=self.per_session,
                )
            if self.per_minute is not None and window >= self.per_minute:
                # the window has room again when the (window - limit + 1)-th oldest write expires
                k = window - self.per_minute
                frees = scalar(
                    conn,
                    "SELECT at FROM write_events WHERE session_id = ? ORDER BY at LIMIT 1 OFFSET ?",
                    (session_id, k),
                )
                frees_at = (frees if frees is not None else now) + self.window_s
                self._store(conn, session_id, window, total, oldest, now)
                raise KmsError(
                    "rate-limited",
                    f"at most {self.per_minute} writes per minute; try again shortly",
                    retryAfterMs=max(1, math.ceil((frees_at - now) * 1000)),
                    limit="per-minute",
                    perMinute=self.per_minute,
                )
            conn.execute("INSERT INTO write_events(session_id, at) VALUES (?, ?)", (session_id, now))
            event_id = conn.last_insert_rowid()
            self._store(conn, session_id, window + 1, total + 1, oldest if oldest is not None else now, now)
        return Slot(session_id, event_id, now)

    def release(self, conn: apsw.Connection, slot: Slot) -> None:
        """Give a slot back (the write it was taken for did not happen)."""
        with write_tx(conn):
            conn.execute("DELETE FROM write_events WHERE rowid = ?", (slot.event_id,))
            if conn.changes():
                conn.execute(
                    "UPDATE write_counters SET total = max(total - 1, 0) WHERE session_id = ?",
                    (slot.session_id,),
                )
            self._refresh(conn, slot.session_id)

    def counters(self, conn: apsw.Connection, session_id: str) -> dict:
        """The live counters of one session (as the dashboard reads them), window recomputed now."""
        now = self.clock()
        window = scalar(
            conn,
            "SELECT count(*) FROM write_events WHERE session_id = ? AND at > ?",
            (session_id, now - self.window_s),
        )
        oldest = scalar(
            conn,
            "SELECT min(at) FROM write_events WHERE session_id = ? AND at > ?",
            (session_id, now - self.window_s),
        )
        total = scalar(conn, "SELECT total FROM write_counters WHERE session_id = ?", (session_id,)) or 0
        return {
            "sessionId": session_id,
            "windowCount": window or 0,
            "total": total,
            "perMinute": self.per_minute,
            "perSession": self.per_session,
            "windowFreesAt": (oldest + self.window_s) if oldest is not None else None,
        }

    def _refresh(self, conn: apsw.Connection, session_id: str) -> None:
        now = self.clock()
        since = now - self.window_s
        live = (session_id, since)
        window = scalar(conn, "SELECT count(*) FROM write_events WHERE session_id = ? AND at > ?", live)
        oldest = scalar(conn, "SELECT min(at) FROM write_events WHERE session_id = ? AND at > ?", live)
        total = scalar(conn, "SELECT total FROM write_counters WHERE session_id = ?", (session_id,)) or 0
        self._store(conn, session_id, window or 0, total, oldest, now)

    def _store(
        self, conn: apsw.Connection, session_id: str, window: int, total: int, oldest: float | None,
        now: float,
    ) -> None:
        """Upsert the row the dashboard reads (0 stands for 'unlimited' in the NOT NULL limit columns)."""
        conn.execute(
            """
            INSERT INTO write_counters(session_id, window_count, total, per_minute, per_session,
                                       window_frees_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(session_id) DO UPDATE SET
                window_count = excluded.window_count, total = excluded.total,
                per_minute = excluded.per_minute, per_session = excluded.per_session,
                window_frees_at = excluded.window_frees_at, updated_at = excluded.updated_at
            """,
            (
                session_id,
                window,
                total,
                self.per_minute or 0,
                self.per_session or 0,
                (oldest + self.window_s) if oldest is not None else None,
                now,
            ),
        )


def session_counters(conn: apsw.Connection) -> list[dict]:
    """Every session's stored counters (for a dashboard that has no limiter of its own)."""
    return rows(conn, "SELECT * FROM write_counters ORDER BY updated_at DESC")
