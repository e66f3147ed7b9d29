"""Dashboard benchmark: open time, RSS, scrolling and tail latency with 100,000 provenance rows.

The baseline is the same dashboard opened on an empty database in the same run (what
Textual itself costs), so the table shows what the provenance volume adds. Each
measurement runs in a fresh child process (headless, 80×24) so imports and caches of
one run don't help the next and RSS is the process's own.

Measured in the child:
- open: from ``create_app`` to the first feed window rendered (state loaded + a refresh);
- rss: resident set size right after that (psutil);
- stall: while paging down through the feed, the longest the UI loop could not run
  (a ticker task measures its own lateness): what "smooth" means to a person;
- older page: from the cursor reaching the end of the window to the next older rows shown;
- tail: a row committed by this process reaching the app's state (poll interval 0.25 s);
- staged: a call staged for approval (a ``pending_writes`` row, as a server commits it) reaching the
  dashboard's pending state.

Usage: python bench/bench_tui.py [--rows 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import table  # noqa: E402

TOOLS = ["kms_create", "kms_append", "kms_insert_at", "kms_update_properties"]
STATUSES = ["success"] * 8 + ["error", "conflict", "rate-limited", "folder-denied"]
OPEN_TARGET_S = 1.0


def seed(db_path: Path, rows: int) -> float:
    """``rows`` provenance rows over 100 sessions (FTS trigger included); returns seconds."""
    from server.activity.session_registry import start_session
    from server.store.db import connect, write_tx

    rng = random.Random(7)
    conn = connect(db_path)
    start = time.perf_counter()
    now = time.time()
    for s in range(100):
        start_session(conn, kind="server", session_id=f"s{s:012x}", pid=1, cwd="/", now=now - 86400 + s * 600)
    batch = []
    for i in range(rows):
        tool = rng.choice(TOOLS)
        status = rng.choice(STATUSES)
        text = f"\n\n- bench line {i} about {rng.choice(['auth', 'outage', 'release', 'budget'])}"
        batch.append(
            (
                now - rows + i,
                f"s{i % 100:012x}",
                tool,
                f"n{i % 5000:012x}",
                "bench",
                f"drafts/note {i % 5000}.md",
                f"note {i % 5000}",
                f'noteId="n{i % 5000:012x}" content="..."',
                status,
                None if status == "success" else status,
                2 if status == "success" else 0,
                text if status == "success" else None,
                100 if status == "success" else None,
            )
        )
    with write_tx(conn):
        conn.executemany(
            "INSERT INTO tool_invocations(at, session_id, tool, note_id, vault, path, title, input_summary, status,"
            " error, lines_added, inserted_text, insert_offset) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            batch,
        )
    conn.close()
    return time.perf_counter() - start


# ----------------------------------------------------------------------------- the child


async def until(cond: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """Poll ``cond()`` with tiny sleeps (no Pilot idle heuristics); fail loudly rather than hang."""
    start = time.perf_counter()
    while not cond():
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)


async def measure(db_path: str, settings: str) -> dict[str, float]:
    import psutil

    from server.activity import provenance
    from server.store.db import connect
    from tui.app import create_app

    start = time.perf_counter()
    app = create_app(db_path, settings_path=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.state.loaded, "the first window")
        await pilot.pause()  # one refresh: the rows are on screen
        opened = time.perf_counter() - start
        feed = app.dashboard.feed
        await until(lambda: not feed.filling, "the whole window")
        window = time.perf_counter() - start
        rss = psutil.Process().memory_info().rss / 2**20
        feed.focus()
        out = {"open_s": opened, "window_s": window, "rss_mb": rss, "rows": feed.row_count}
        if feed.row_count:
            stalls: list[float] = []
            paging = True

            async def watch_loop() -> None:  # how long the UI loop could not run while paging
                while paging:
                    t0 = time.perf_counter()
                    await asyncio.sleep(0.002)
                    stalls.append(time.perf_counter() - t0 - 0.002)

            watcher = asyncio.create_task(watch_loop())
            for _ in range(20):
                await pilot.press("pagedown")
            paging = False
            await watcher
            out["stall_max_ms"] = max(stalls) * 1000
            out["stall_p95_ms"] = sorted(stalls)[int(0.95 * (len(stalls) - 1))] * 1000
            if feed.more:
                before = feed.row_count
                t = time.perf_counter()
                feed.action_scroll_bottom()  # what End does, without Pilot's wait-for-idle in the timing
                await until(lambda: feed.row_count > before, "older rows")
                out["older_ms"] = (time.perf_counter() - t) * 1000
        conn = connect(db_path)
        new = provenance.record(conn, tool="kms_append", session_id="sbench", status="success")
        committed = time.time()
        await until(lambda: new in app.state.arrivals, "the tail row")
        out["tail_ms"] = (app.state.arrivals[new] - committed) * 1000
        from server.activity import approvals

        staged = approvals.stage(
            conn,
            session_id="sbench",
            tool="kms_append",
            arguments={"content": "x"},
            input_summary='content="x"',
            files=[],
            lines=1,
            timeout_s=60,
        )
        committed = time.perf_counter()  # as a server in another process stages a call for approval
        await until(lambda: any(p.id == staged for p in app.state.pending), "the staged write")
        out["staged_ms"] = (time.perf_counter() - committed) * 1000
        conn.close()
    return out


def child(db_path: str, settings: str) -> None:
    print(json.dumps(asyncio.run(measure(db_path, settings))))


def run_child(db_path: Path, settings: Path) -> dict[str, float]:
    """One measurement on a fresh copy (the tail check writes a row; the next run must not see it)."""
    run = db_path.with_name("run-" + db_path.name)
    for suffix in ("-wal", "-shm"):
        Path(str(run) + suffix).unlink(missing_ok=True)
    shutil.copyfile(db_path, run)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(run), str(settings)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", nargs=2, metavar=("DB", "SETTINGS"))
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    tmp = Path(tempfile.mkdtemp(prefix="kms-bench-tui-"))
    try:
        from server.store.db import connect

        empty, big = tmp / "empty.db", tmp / "big.db"
        connect(empty).close()
        seconds = seed(big, args.rows)
        print(f"seeded {args.rows:,} provenance rows in {seconds:.1f}s ({big.stat().st_size / 2**20:.0f} MB)")
        settings = tmp / "config.toml"
        base = [run_child(empty, settings) for _ in range(args.runs)]
        ours = [run_child(big, settings) for _ in range(args.runs)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(runs: list[dict[str, float]], key: str) -> float:
        values = sorted(r[key] for r in runs if key in r)
        return values[len(values) // 2] if values else float("nan")

    rows = []
    for key, label, unit, target in (
        ("open_s", "open to first rows", "s", f"< {OPEN_TARGET_S:.0f} s"),
        ("window_s", "whole 500-row window in", "s", ""),
        ("rss_mb", "RSS after open", "MB", ""),
        ("tail_ms", "tail: commit -> in app", "ms", "< 500 ms"),
        ("staged_ms", "staged write -> pending pane", "ms", "< 500 ms"),
    ):
        ours_v, base_v = med(ours, key), med(base, key)
        ok = ""
        if key == "open_s":
            ok = " ✓" if ours_v < OPEN_TARGET_S else " ✗"
        if key in ("tail_ms", "staged_ms"):
            ok = " ✓" if ours_v < 500 else " ✗"
        rows.append((label, f"{ours_v:.2f} {unit}", f"{base_v:.2f} {unit}", f"{ours_v / base_v:.2f}x", target + ok))
    rows.append(("UI loop stall while paging p95", f"{med(ours, 'stall_p95_ms'):.1f} ms", "-", "-", "smooth: < 50 ms"))
    rows.append(("UI loop stall while paging max", f"{med(ours, 'stall_max_ms'):.1f} ms", "-", "-", ""))
    rows.append(("end of window -> older rows shown", f"{med(ours, 'older_ms'):.0f} ms", "-", "-", ""))
    rows.append(("rows in the window", f"{med(ours, 'rows'):.0f}", f"{med(base, 'rows'):.0f}", "-", "500 of all"))
    table(
        f"kms tui with {args.rows:,} provenance rows vs an empty DB (median of {args.runs} runs, headless 80x24)", rows
    )


if __name__ == "__main__":
    main()
