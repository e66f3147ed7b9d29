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
        if slot.event_id < 0:  # an unmetered slot: nothing was counted
            return
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
        self,
        conn: apsw.Connection,
        session_id: str,
        window: int,
        total: int,
        oldest: float | None,
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


# ----------------------------------------------------------------------------- gauges


@dataclass(frozen=True)
class Gauge:
    """One session's write budget as the limiter sees it now: the one formula every view shows.

    ``known`` says whether the session's limits are on record (its server records them at
    start, before any write); then a None limit means unlimited. Without a record (a
    read-only session, a server not started yet) nothing is known and nothing reads as ∞.
    ``next_write_at`` is set only while the session may not write.
    """

    window_count: int = 0
    per_minute: int | None = None
    total: int = 0
    per_session: int | None = None
    next_write_at: float | None = None
    exhausted: bool = False  # the per-session total is used up: no more writes this session
    known: bool = False

    @property
    def limited(self) -> bool:
        return self.exhausted or self.next_write_at is not None

    def _of(self, count: int, limit: int | None) -> str:
        return f"{count}/{limit if limit else '∞' if self.known else '-'}"

    @property
    def minute_text(self) -> str:
        """``3/10``: writes in the current minute against the per-minute limit."""
        return self._of(self.window_count, self.per_minute)

    @property
    def total_text(self) -> str:
        """``42/200``: the session's writes against its total."""
        return self._of(self.total, self.per_session)


def record_limits(conn: apsw.Connection, session_id: str, limiter: RateLimiter) -> None:
    """Put a session's limits on record before its first write, so its gauge shows them at once.

    Counts already recorded (a session served by an earlier process) are kept.
    """
    with write_tx(conn):
        conn.execute(
            """INSERT INTO write_counters(session_id, window_count, total, per_minute, per_session, updated_at)
               VALUES (?, 0, 0, ?, ?, ?)
               ON CONFLICT(session_id) DO UPDATE SET
                   per_minute = excluded.per_minute, per_session = excluded.per_session""",
            (session_id, limiter.per_minute or 0, limiter.per_session or 0, limiter.clock()),
        )


def session_gauges(conn: apsw.Connection, now: float) -> dict[str, Gauge]:
    """Every session on record with its gauge, the window recomputed at ``now``.

    The stored ``window_count`` is only as fresh as the session's last write, so the window
    is counted again from ``write_events`` (at most a minute of events per session), and the
    next free slot is found the way ``RateLimiter.acquire`` finds it.
    """
    events: dict[str, list[float]] = {}
    for sid, at in conn.execute(
        "SELECT session_id, at FROM write_events WHERE at > ? ORDER BY session_id, at", (now - WINDOW_S,)
    ):
        events.setdefault(sid, []).append(at)
    out: dict[str, Gauge] = {}
    for c in rows(conn, "SELECT session_id, total, per_minute, per_session FROM write_counters"):
        window = events.get(c["session_id"], [])
        per_minute = c["per_minute"] or None  # 0 stands for unlimited in the NOT NULL columns
        per_session = c["per_session"] or None
        exhausted = per_session is not None and c["total"] >= per_session
        next_at = None
        if not exhausted and per_minute is not None and len(window) >= per_minute:
            next_at = window[len(window) - per_minute] + WINDOW_S
        out[c["session_id"]] = Gauge(len(window), per_minute, c["total"], per_session, next_at, exhausted, True)
    return out


class Unmetered(RateLimiter):
    """No limit and no count: kms's own writes on a session's behalf (its session note) never use the
    agent's write slots."""

    def __init__(self) -> None:
        super().__init__(None, None)

    def acquire(self, conn: apsw.Connection, session_id: str) -> Slot:
        return Slot(session_id, -1, self.clock())
