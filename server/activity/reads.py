"""Read tracking: which notes each session's agent has seen, and what it searched for, recorded off the
request path.

Reads enqueue (note, session) pairs and searches (tool, query); a background thread with its own connection
writes them in batches, so a read tool never waits on a write transaction.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

from server.activity.session_material import record_searches
from server.store.db import thread_connection, write_tx

_UPSERT = """
INSERT INTO note_reads(note_id, session_id, count, first_at, last_at) VALUES (?, ?, 1, ?, ?)
ON CONFLICT(note_id, session_id) DO UPDATE SET count = count + 1, last_at = excluded.last_at
"""


def _drain(q: queue.Queue[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out


class ReadTracker:
    def __init__(self, db_path: Path, session_id: str, interval: float = 0.2) -> None:
        self.db_path = db_path
        self.session_id = session_id
        self.interval = interval
        self._queue: queue.Queue[tuple[str, float]] = queue.Queue()
        self._searches: queue.Queue[tuple[str, str, float]] = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def record(self, note_ids: list[str]) -> None:
        now = time.time()
        for nid in dict.fromkeys(note_ids):
            self._queue.put((nid, now))
        self._start()

    def record_search(self, tool: str, query: str) -> None:
        """A search the session made (``session_searches``, for its session note)."""
        self._searches.put((tool, query, time.time()))
        self._start()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kms-read-tracker", daemon=True)
            self._thread.start()

    def flush(self) -> int:
        """Write everything queued now; return how many reads were written."""
        batch: list[tuple[str, float]] = _drain(self._queue)
        searches: list[tuple[str, str, float]] = _drain(self._searches)
        if not batch and not searches:
            return 0
        with self._lock:
            conn = thread_connection(self.db_path)  # the tracker thread's own, opened once
            with write_tx(conn):
                conn.executemany(_UPSERT, [(nid, self.session_id, at, at) for nid, at in batch])
                if searches:
                    record_searches(conn, self.session_id, searches)
        return len(batch)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    def close(self) -> None:
        """Stop, and write what is queued: after the thread's own last batch is committed (it may be
        mid-write), so nothing recorded is still in flight when the session ends."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.flush()
