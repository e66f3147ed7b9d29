"""Vault core benchmark: cold index, no-change reindex and search vs a raw APSW FTS5 baseline.

The baseline is the least any indexer must do: read every file and insert it into an FTS5
table, nothing else; its query is a bare ``MATCH ... ORDER BY rank LIMIT 10`` with snippet.
Both run in this process, on the same generated 10k-note vault, in the same run.
Usage: python bench/bench_core.py [--notes N]
"""

from __future__ import annotations

import argparse
import os

import apsw
from common import fresh_db, percentiles, table, timed, vault

QUERIES = ["auth error handling", "release checklist", "python logging", "thread", "database migration plan",
           "socket timeout", "json", "decimal context precision", "budget", "hiring loop questions",
           "subprocess pipe", "unicode", "archive", "zip file", "osprey launch", "email header",
           "default value", "the file", "incident", "review"]


def baseline_index(root: str, db: str) -> apsw.Connection:
    conn = apsw.Connection(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(path, body)")
    conn.execute("BEGIN")
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".md"):
                p = os.path.join(dirpath, name)
                with open(p, encoding="utf-8") as fh:
                    conn.execute("INSERT INTO f VALUES (?, ?)", (p, fh.read()))
    conn.execute("COMMIT")
    return conn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    root = vault(args.notes)

    from server.index.indexer import index_vault
    from server.index.search import build_match, search
    from server.store.db import connect
    from server.vault.registry import add_vault, get_vault

    base_times, ours_times = [], []
    for _ in range(args.rounds):  # alternate so both see the same machine state
        db = str(fresh_db("baseline.db"))
        base_times.append(timed(lambda db=db: baseline_index(str(root), db).close()))
        path = fresh_db("kms.db")

        def ours(path=path) -> None:
            conn = connect(path)
            index_vault(conn, add_vault(conn, root, "bench"))
            conn.close()

        ours_times.append(timed(ours))
    base_cold, ours_cold = min(base_times), min(ours_times)

    conn = connect(path)
    v = get_vault(conn, "bench")
    noop = sorted(timed(lambda: index_vault(conn, get_vault(conn, "bench"))) for _ in range(5))[2]

    bconn = baseline_index(str(root), str(fresh_db("baseline.db")))
    base_sql = "SELECT rowid, snippet(f, 1, '**', '**', '…', 32) FROM f WHERE f MATCH ? ORDER BY rank LIMIT 10"
    ours_s, base_s = [], []
    for r in range(10):  # each query back to back on both, who goes first alternating
        for q in QUERIES:
            pair = [
                (ours_s, lambda q=q: search(conn, q, 10)),
                (base_s, lambda q=q: bconn.execute(base_sql, (build_match(q)[0],)).fetchall()),
            ]
            for samples, fn in pair if r % 2 == 0 else reversed(pair):
                samples.append(timed(fn))
    o50, o95 = percentiles(ours_s)
    b50, b95 = percentiles(base_s)
    n = sum(1 for _ in root.rglob("*.md"))
    mb = sum(f.stat().st_size for f in root.rglob("*.md")) / 1e6
    ms = 1000
    table(f"vault core: {n} notes, {mb:.1f} MB (min of {args.rounds} cold runs; {len(ours_s)} queries)", [
        ("cold index (s)", f"{ours_cold:.2f}", f"{base_cold:.2f}", f"{ours_cold / base_cold:.2f}x", "<= 1.5x"),
        ("cold index (notes/s)", f"{n / ours_cold:.0f}", f"{n / base_cold:.0f}", "", ""),
        ("no-change reindex (s)", f"{noop:.3f}", "", "", "<= 0.3 s"),
        ("search p50 (ms)", f"{o50 * ms:.2f}", f"{b50 * ms:.2f}", f"{o50 / b50:.2f}x", "<= 1.2x"),
        ("search p95 (ms)", f"{o95 * ms:.2f}", f"{b95 * ms:.2f}", f"{o95 / b95:.2f}x", "<= 1.2x"),
    ])
    del v


if __name__ == "__main__":
    main()
