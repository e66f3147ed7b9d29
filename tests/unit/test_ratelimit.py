"""Write limits: sliding window, per-session total, exact under floods from threads and processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.writes import Env, Writer, make_env

from server.activity.provenance import list_invocations
from server.activity.ratelimit import RateLimiter
from server.errors import KmsError
from server.store.db import connect, scalar, thread_connection

WORKER = Path(__file__).parents[1] / "support" / "write_workers.py"


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "kms.db"
    connect(path).close()
    return path


def test_window_and_retry_after(db: Path) -> None:
    conn = connect(db)
    clock = Clock()
    lim = RateLimiter(3, 100, clock=clock)
    for _ in range(3):
        lim.acquire(conn, "s")
        clock.t += 10
    with pytest.raises(KmsError) as e:
        lim.acquire(conn, "s")
    assert e.value.kind == "rate-limited" and e.value.extra["retryAfterMs"] == 30_000
    clock.t += 30
    lim.acquire(conn, "s")  # the first write left the window
    lim.acquire(conn, "other")  # sessions are independent
    row = conn.execute("SELECT window_count, total, per_minute, per_session FROM write_counters WHERE session_id='s'")
    assert row.fetchone() == (3, 4, 3, 100)
    c = lim.counters(conn, "s")
    assert c["windowCount"] == 3 and c["total"] == 4 and c["windowFreesAt"] == pytest.approx(1_000_000 + 10 + 60)


def test_session_total_and_release(db: Path) -> None:
    conn = connect(db)
    clock = Clock()
    lim = RateLimiter(None, 5, clock=clock)
    slots = [lim.acquire(conn, "s") for _ in range(5)]
    with pytest.raises(KmsError) as e:
        lim.acquire(conn, "s")
    assert e.value.extra["retryAfterMs"] is None and e.value.extra["limit"] == "per-session"
    lim.release(conn, slots[0])  # that write did not happen
    lim.acquire(conn, "s")
    assert scalar(conn, "SELECT total FROM write_counters WHERE session_id='s'") == 5


def test_thread_flood_is_exact(db: Path) -> None:
    lim = RateLimiter(25, 1000)
    ok: list[int] = []
    limited: list[int] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        conn = thread_connection(db)
        barrier.wait()
        for _ in range(10):
            try:
                lim.acquire(conn, "flood")
                ok.append(1)
            except KmsError:
                limited.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 25 and len(limited) == 55


def test_process_flood_is_exact(db: Path, tmp_path: Path) -> None:
    start = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "acquire", str(db), "pflood", "15", "20", "1000", str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    start.touch()
    outs = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    assert sum(o["ok"] for o in outs) == 20 and sum(o["limited"] for o in outs) == 40
    conn = connect(db)
    assert scalar(conn, "SELECT window_count FROM write_counters WHERE session_id = 'pflood'") == 20


def test_writeservice_flood(tmp_path: Path) -> None:
    """Through the whole pipeline: exactly the allowed writes land, the rest are recorded as rate-limited."""
    env: Env = make_env(tmp_path)
    nid = env.note("n.md", "start\n")
    ws = Writer(env.db_path, "agent-1", RateLimiter(12, 1000))
    results: list[str] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        for i in range(6):
            try:
                ws.append(nid, f"line {k}-{i}", separator="\n")
                out = "success"
            except KmsError as e:
                out = e.kind
            with lock:
                results.append(out)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("success") == 12 and results.count("rate-limited") == 18
    assert env.read("n.md").count("line ") == 12
    rows = list_invocations(env.conn, session="agent-1", limit=100)
    assert sum(r["status"] == "success" for r in rows) == 12 and sum(r["status"] == "rate-limited" for r in rows) == 18
    assert ws.counters()["windowCount"] == 12


def test_failed_writes_do_not_count(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    nid = env.note("n.md", "x\n")
    ws = Writer(env.db_path, "s", RateLimiter(2, 1000))
    for _ in range(5):
        with pytest.raises(KmsError):
            ws.append(nid, "y", heading="No such heading")
    ws.append(nid, "a")
    ws.append(nid, "b")
    with pytest.raises(KmsError) as e:
        ws.append(nid, "c")
    assert e.value.kind == "rate-limited" and e.value.extra["retryAfterMs"] > 0
