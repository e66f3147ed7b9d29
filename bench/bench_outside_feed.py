"""The dashboard feed's edits made outside kms (``server.activity.outside_feed``) on a large history.

100,000 kept versions of 10,000 notes and 20,000 hook reports of 40 sessions (each naming the bytes of a
version): the first window (500 rows), the same narrowed to one session, a page back, one row's detail (its
diff), and the live tail's check when nothing changed (what the dashboard pays on every commit) and after
one new reported edit. The baseline is the calls' own feed window (``feed.feed_page``) on 100,000
provenance rows in the same database.

Usage: python bench/bench_outside_feed.py [--versions 100000] [--reports 20000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import table  # noqa: E402

NOTES = 10_000


def seed(db: Path, versions: int, reports: int, calls: int) -> None:
    from server.store import version_blobs as blobs
    from server.store.db import connect

    rng = random.Random(7)
    conn = connect(db)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO vaults (name, root, added_at) VALUES ('v', '/nonexistent', 1)")
    for h in range(1, NOTES + 1):
        conn.execute(
            "INSERT INTO history_notes (hid, vault_id, note_id, path) VALUES (?, 1, ?, ?)", (h, f"n{h}", f"n{h}.md")
        )
    t0 = time.time() - versions
    kept: list[tuple[float, str, str]] = []
    for i in range(versions):
        h = rng.randint(1, NOTES)
        data = f"# Note {h}\n\nversion {i}\n".encode() * 20
        bid = blobs.put_blob(conn, data)
        conn.execute(
            "INSERT INTO history_versions (hid, at, path, bid, size, how) VALUES (?, ?, ?, ?, ?, 'watch')",
            (h, t0 + i, f"n{h}.md", bid, len(data)),
        )
        kept.append((t0 + i, f"n{h}.md", blobs.sha256_hex(data)))
    for k, (at, path, digest) in enumerate(sorted(rng.sample(kept, reports))):
        conn.execute(
            "INSERT INTO session_files (session_id, at, tool, file, vault_id, path, hash_after) "
            "VALUES (?, ?, 'Edit', ?, 1, ?, ?)",
            (f"s{k % 40}", at + 1, f"/nonexistent/{path}", path, digest),
        )
    conn.executemany(
        "INSERT INTO tool_invocations (at, session_id, actor, tool, status, input_summary, vault, path) "
        "VALUES (?, 's0', 'agent', 'kms_append', 'success', '', 'v', 'n1.md')",
        [(t0 + i * versions / calls,) for i in range(calls)],
    )
    conn.execute("COMMIT")
    conn.close()


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """(median, max) milliseconds."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return statistics.median(out), max(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", type=int, default=100_000)
    parser.add_argument("--reports", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args()
    from server.activity import feed, outside_feed
    from server.activity.feed import FeedFilter
    from server.store.db import connect

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "kms.db"
        seed(db, args.versions, args.reports, args.calls)
        conn = connect(db)
        base = timed(lambda: feed.feed_page(conn), 10)
        first = outside_feed.merged_page(conn)
        oldest = min(r["fid"] for r in first.rows if outside_feed.is_outside(r))
        rows = [
            ("first window (500 rows)", timed(lambda: outside_feed.merged_page(conn), 10)),
            ("one session's window", timed(lambda: outside_feed.merged_page(conn, FeedFilter(session="s7")), 10)),
            ("a page back", timed(lambda: outside_feed.merged_page(conn, before_report=oldest), 10)),
            ("one row's detail (diff)", timed(lambda: outside_feed.detail(conn, oldest), 20)),
            ("tail, nothing new", timed(lambda: outside_feed.since(conn, first.mark), 200)),
        ]
        conn.execute(
            "INSERT INTO session_files (session_id, at, tool, file, vault_id, path) "
            "VALUES ('s1', ?, 'Edit', '/nonexistent/n1.md', 1, 'n1.md')",
            (time.time() - 5,),
        )
        rows.append(("tail, one new report", timed(lambda: outside_feed.since(conn, first.mark), 50)))
        table(
            f"Outside edits in the feed: {args.versions:,} versions, {args.reports:,} reports, {args.calls:,} calls",
            [
                (name, f"{med:.2f} ms (max {mx:.2f})", f"{base[0]:.2f} ms", f"{med / base[0]:.1f}x", "bounded")
                for name, (med, mx) in rows
            ],
        )


if __name__ == "__main__":
    main()
