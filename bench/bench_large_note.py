"""One large note in the vault: ``kms_search``'s time must not depend on the size of the notes it
matches (issue 31: a 5 MB note made every search that matched it take a minute, in ``snippet()``).

The bench queries run on the 10k-note bench vault alone; then a second vault holding one 5 MB note
made of the same sentences, with the word "alpha" on some of its lines, joins the same database, and
queries holding "alpha" (the large note is their first hit, the 10k notes the rest) run beside the
bench queries. Target: p95 with the large note <= 2x p95 without it. The reference row is FTS5's own
``snippet()`` over the large note, what every search that showed it paid before.

Usage: python bench/bench_large_note.py [--notes N] [--mb N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
from typing import TYPE_CHECKING

from bench_core import QUERIES, isolated_env
from common import OUT, fresh_db, percentiles, table, timed, vault

if TYPE_CHECKING:
    import apsw


def large_note(folder: str, megabytes: float) -> int:
    from genvault import sentences

    rng = random.Random(7)
    pool = sentences()
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    parts = ["# Everything at once\n"]
    size = 0
    while size < megabytes * 1e6:
        line = " ".join(rng.choice(pool) for _ in range(8)) + (" alpha" if rng.random() < 0.01 else "") + "\n"
        parts.append(line)
        size += len(line)
    parts.append("the last line holds omega, found only at the very end\n")  # the excerpt scan's worst case
    with open(os.path.join(folder, "everything.md"), "w") as f:
        f.write("".join(parts))
    return size


LARGE_QUERIES = ["alpha", "alpha thread", "alpha json", "alpha budget", "alpha unicode", "omega"]


def measure(conn: apsw.Connection, rounds: int, queries: list[str]) -> tuple[float, float, int]:
    from server.index.search import search

    samples: list[float] = []
    big_hits = 0
    for _ in range(rounds):
        for q in queries:
            samples.append(timed(lambda q=q: search(conn, q, 10)))
    for q in queries:
        big_hits += any(h["path"] == "everything.md" and h["vault"] == "large" for h in search(conn, q, 10)["hits"])
    p50, p95 = percentiles(samples)
    return p50, p95, big_hits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    os.environ.clear()
    os.environ.update(isolated_env())
    root = vault(args.notes)

    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    conn = connect(fresh_db("large-note.db"))
    index_vault(conn, add_vault(conn, root, "bench"))
    measure(conn, 1, QUERIES)  # warm the cache, as a running server has it
    a50, a95, _ = measure(conn, args.rounds, QUERIES)
    folder = str(OUT / "large-note-vault")
    size = large_note(folder, args.mb)
    from pathlib import Path

    index_vault(conn, add_vault(conn, Path(folder), "large"))
    queries = QUERIES + LARGE_QUERIES
    measure(conn, 1, queries)
    b50, b95, matched = measure(conn, args.rounds, queries)
    l50, l95, shown = measure(conn, args.rounds, LARGE_QUERIES)
    rid = conn.execute("SELECT rid FROM notes WHERE path = 'everything.md'").fetchall()[0][0]
    reference = "SELECT snippet(notes_fts, 1, '**', '**', '…', 32) FROM notes_fts WHERE notes_fts MATCH ? AND rowid = ?"
    snippet_s = timed(lambda: conn.execute(reference, ("alpha", rid)).fetchall())
    snippet_the = timed(lambda: conn.execute(reference, ("the", rid)).fetchall())
    ms = 1000
    load = os.getloadavg()[0]
    table(
        f"search with one {size / 1e6:.1f} MB note beside {args.notes} notes (baseline: those notes alone, "
        f"{len(QUERIES)} queries x {args.rounds}; load average {load:.1f})",
        [
            (f"search p50 (ms), {len(queries)} queries", f"{b50 * ms:.2f}", f"{a50 * ms:.2f}", f"{b50 / a50:.2f}x", ""),
            (
                f"search p95 (ms), {len(queries)} queries",
                f"{b95 * ms:.2f}",
                f"{a95 * ms:.2f}",
                f"{b95 / a95:.2f}x",
                "<= 2x",
            ),
            (f"search p50 (ms), the {shown} showing it", f"{l50 * ms:.2f}", f"{a50 * ms:.2f}", f"{l50 / a50:.2f}x", ""),
            (
                f"search p95 (ms), the {shown} showing it",
                f"{l95 * ms:.2f}",
                f"{a95 * ms:.2f}",
                f"{l95 / a95:.2f}x",
                "<= 2x",
            ),
            ("snippet() over the large note, alpha (ms)", f"{snippet_s * ms:.1f}", "", "", "reference: before"),
            ("snippet() over the large note, the (ms)", f"{snippet_the * ms:.1f}", "", "", "reference: before"),
        ],
    )
    del matched
    conn.close()


if __name__ == "__main__":
    main()
