"""The raw FTS5 baseline: read every file and insert it into an FTS5 table, nothing else.

Imported by the benchmarks (in-process) and run as a whole process by ``bench_core.py``
(``python bench/raw_index.py ROOT DB``): it imports only ``os``, ``sys`` and ``apsw``, the least
any indexer's process must load.
"""

from __future__ import annotations

import os
import sys

import apsw


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


if __name__ == "__main__":
    baseline_index(sys.argv[1], sys.argv[2]).close()
