"""The floor of a cold index: what kms's cold ``kms vault add`` costs before a single note is parsed, against
the raw FTS5 baseline's whole process (issues 28 and 29: CPU ≤ 1.8×, wall ≤ 1.5×).

Rows, each the fastest of ``--runs`` and its range, CPU time (user + system):
- the raw baseline process (``raw_index.py``) on the vault;
- kms's start with nothing to index: ``kms vault add`` of an empty folder (the interpreter, the imports,
  the schema);
- the writer alone, in this process: every file read and parsed *before* the clock starts, the records
  then handed to ``index_vault`` in place of its reader (``read_all``), so the clock sees the SQL (the
  notes and FTS rows, the child rows, history's first versions, link resolution, the commit) and the
  writer's own Python, nothing of the parse; with history on and off;
- the parse alone, in this process, on one core (``record_of_bytes`` over every file).

The floor is the start plus the writer: what no parser, however fast, takes away.

Usage: python bench/bench_floor.py [--notes 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench_core import compile_bytecode, isolated_env, kms, run
from bench_history import settings
from bench_scripts import with_scripts
from common import HERE, OUT, fresh_db, table, vault


def writer_alone(root: Path, history: bool) -> float:
    """CPU seconds of ``index_vault`` on a fresh database, its records prepared beforehand."""
    import server.index.indexer as indexer
    from server.index.records import read_record, scan
    from server.store.db import connect
    from server.store.version_blobs import compress
    from server.vault.registry import add_vault

    files, _unreadable, _errors = scan(root)
    records = [read_record(str(root), p, m, s) for p, (m, s) in files.items()]
    for rec in records:  # as the parser workers send them: compressed for history, or without bytes
        rec.packed = compress(rec.data, None) if history and rec.data is not None else None
        rec.data = None
    path = OUT / f"floor-history-{'on' if history else 'off'}.toml"
    settings(path, history)
    os.environ["KMS_CONFIG"] = str(path)
    conn = connect(fresh_db("floor.db"))
    add_vault(conn, root, "floor")
    reader = indexer.read_all
    indexer.read_all = lambda *_args: iter(records)  # the parse is done: the clock sees the writer only
    try:
        start = time.process_time()
        indexer.index_all(conn)
        return time.process_time() - start
    finally:
        indexer.read_all = reader
        conn.close()


def parse_alone(root: Path) -> float:
    from server.index.records import record_of_bytes, scan

    files, _unreadable, _errors = scan(root)
    data = []
    for path, (mtime, _size) in files.items():
        data.append((path, mtime, (root / path).read_bytes()))
    start = time.process_time()
    for path, mtime, raw in data:
        record_of_bytes(path, mtime, raw)
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    root = with_scripts(vault(args.notes))
    empty = OUT / "floor-empty-vault"
    empty.mkdir(parents=True, exist_ok=True)
    env = isolated_env()
    compile_bytecode(env)
    before = os.getloadavg()
    cpu: dict[str, list[float]] = {"raw": [], "start": [], "on": [], "off": [], "parse": []}
    for _ in range(args.runs):
        run([sys.executable, str(HERE / "raw_index.py"), str(root), str(fresh_db("floor-raw.db"))], env, cpu["raw"])
        run(kms("vault", "add", str(empty)), {**env, "KMS_DB_PATH": str(fresh_db("floor-empty.db"))}, cpu["start"])
        cpu["on"].append(writer_alone(root, history=True))
        cpu["off"].append(writer_alone(root, history=False))
        cpu["parse"].append(parse_alone(root))
    raw = min(cpu["raw"])

    def row(name: str, key: str, vs_raw: bool = False) -> tuple[str, str, str, str, str]:
        best = min(cpu[key])
        ratio = f"{best / raw:.2f}x" if vs_raw else ""
        return (name, f"{best:.2f} ({best:.2f}-{max(cpu[key]):.2f})", f"{raw:.2f} raw", ratio, "")

    floor_on = min(cpu["start"]) + min(cpu["on"])
    floor_off = min(cpu["start"]) + min(cpu["off"])
    table(
        f"the floor of a cold index, {args.notes} notes, CPU seconds ({args.runs} runs; load "
        f"{' '.join(f'{x:.1f}' for x in before)} before, {' '.join(f'{x:.1f}' for x in os.getloadavg())} after)",
        [
            row("raw baseline process", "raw"),
            row("kms start, nothing to index (kms vault add EMPTY)", "start", vs_raw=True),
            row("writer alone, history on (records prepared beforehand)", "on", vs_raw=True),
            row("writer alone, history off", "off", vs_raw=True),
            row("parse alone, one core (record_of_bytes)", "parse", vs_raw=True),
            (
                "floor: start + writer, history on",
                f"{floor_on:.2f}",
                f"{raw:.2f} raw",
                f"{floor_on / raw:.2f}x",
                "<= 1.8x",
            ),
            ("floor: start + writer, history off", f"{floor_off:.2f}", f"{raw:.2f} raw", f"{floor_off / raw:.2f}x", ""),
        ],
    )


if __name__ == "__main__":
    main()
