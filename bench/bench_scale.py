"""Issue 29, scale and cost: what stays flat from 10k to 50k notes, each row against its baseline measured in
the same run (ratios in one run are what count: the machine is shared, so the load average is printed).

Per vault size (the generated vault plus ``bench_scripts``' notes in Chinese, Japanese, Korean and Thai):
- ``kms vault add`` cold, a whole process (wall and CPU, the parser workers included), against
  ``raw_index.py`` as a process; rounds alternate who goes first, ratios paired per round;
- no-change ``kms index`` against the start-up every command pays (``kms --version``) + 0.3 s;
- ``kms_start`` and ``kms_list_folder`` round trips over stdio (p50/p95; targets 50 ms and 10 ms), beside
  the SDK's minimal server's ``echo``;
- search p95 of Latin queries (``bench_core``'s) and of CJK/Thai substrings, in process, against the bare
  FTS5 query on the raw baseline's database, back to back.

Usage: python bench/bench_scale.py [--sizes 10000 50000] [--rounds 2] [--calls 100] [--calls-only]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_core import QUERIES, compile_bytecode, isolated_env, kms, run, spread
from bench_mcp import FOLDERS, LeanClient
from bench_scripts import CJK_QUERIES, with_scripts
from common import HERE, fresh_db, percentiles, table, timed, vault

Row = tuple[str, str, str, str, str]  # (metric, kms, baseline, ratio, target): common.table
RAW_SQL = "SELECT rowid, snippet(f, 1, '**', '**', '…', 32) FROM f WHERE f MATCH ? ORDER BY rank LIMIT 10"


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def processes(root: Path, n: int, rounds: int, env: dict[str, str]) -> tuple[list[Row], Path, Path]:
    raw: list[float] = []
    add: list[float] = []
    cpu: dict[str, list[float]] = {"raw": [], "add": [], "noop": [], "start": []}
    noop: list[float] = []
    start: list[float] = []
    db, raw_db = fresh_db(f"scale-{n}.db"), fresh_db(f"scale-raw-{n}.db")
    for r in range(rounds):
        env["KMS_DB_PATH"] = str(fresh_db(f"scale-{n}.db"))
        steps = [
            (raw, "raw", [sys.executable, str(HERE / "raw_index.py"), str(root), str(fresh_db(f"scale-raw-{n}.db"))]),
            (add, "add", kms("vault", "add", str(root), "--name", "bench")),
        ]
        for samples, name, cmd in steps if r % 2 == 0 else reversed(steps):
            samples.append(run(cmd, env, cpu[name]))
        for _ in range(3):
            noop.append(run(kms("index", "--no-embed"), env, cpu["noop"]))
            start.append(run(kms("--version"), env, cpu["start"]))
    paired = sorted(a / b for a, b in zip(add, raw, strict=True))
    cpu_paired = sorted(a / b for a, b in zip(cpu["add"], cpu["raw"], strict=True))
    floor = min(start) + 0.3
    rows = [
        ("start-up, kms --version (s)", spread(start), "", "", ""),
        (
            "kms vault add, cold, wall (s)",
            spread(add),
            spread(raw),
            f"{min(add) / min(raw):.2f}x ({paired[0]:.2f}-{paired[-1]:.2f}x)",
            "<= 1.5x",
        ),
        (
            "kms vault add, cold, CPU (s)",
            spread(cpu["add"]),
            spread(cpu["raw"]),
            f"{min(cpu['add']) / min(cpu['raw']):.2f}x ({cpu_paired[0]:.2f}-{cpu_paired[-1]:.2f}x)",
            "<= 1.8x",
        ),
        (
            "kms index, no change, wall (s)",
            spread(noop),
            f"start-up + 0.3 = {floor:.2f}",
            "",
            "ok" if min(noop) <= floor else "over",
        ),
        ("kms index, no change, CPU (s)", spread(cpu["noop"]), f"start-up {spread(cpu['start'])}", "", ""),
    ]
    return rows, db, raw_db


def settled_round_trips(cmd: list[str], env: dict[str, str], tool: str, args_for: Any, calls: int) -> list[float]:
    """Round trips once the server has settled: a new ``kms mcp``'s watcher first checks the whole vault
    for changes made while no kms ran (a no-change index: at 50k notes about a second on this machine),
    and a call made meanwhile waits for the interpreter's lock; that start is not what a call costs."""
    import time

    client = LeanClient(cmd, env)
    try:
        client.call(tool, args_for(0))
        time.sleep(SETTLE_S)
        return [timed(lambda i=i: client.call(tool, args_for(i))) for i in range(calls)]
    finally:
        client.close()


SETTLE_S = 8.0
CATCH_UP_S = 5.0  # the watcher first yields 2 s after it starts (``RULES_CHECK_MS``), its scan ends well before 5 s


def catch_up_round_trips(cmd: list[str], env: dict[str, str], args_for: Any) -> list[float]:
    """``kms_list_folder`` back to back through a new server's first seconds: its watcher sets up the
    watch and checks the whole vault meanwhile (what a call waits for then is the interpreter's lock)."""
    import time

    client = LeanClient(cmd, env)
    try:
        client.call("kms_list_folder", args_for(0))
        samples: list[float] = []
        start = time.perf_counter()
        while time.perf_counter() - start < CATCH_UP_S:
            samples.append(timed(lambda i=len(samples): client.call("kms_list_folder", args_for(i))))
        return samples
    finally:
        client.close()


def round_trips(db: Path, calls: int) -> list[Row]:
    from kmscli.compose import kms_command
    from server.config.session_contract import SessionConfig

    session = SessionConfig(
        db_path=db,
        config_path=HERE / "out" / "bench-settings-none.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=False,
        session_id="bench-scale",
        embed_enabled=False,
        per_minute=10_000,
        per_session=1_000_000,
        project="/bench/project",
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KMS_")}, **session.to_env()}
    command, args = kms_command()
    cmd = [command, *args]
    start = settled_round_trips(cmd, env, "kms_start", lambda i: {}, calls)
    folder = settled_round_trips(cmd, env, "kms_list_folder", lambda i: {"path": FOLDERS[i % len(FOLDERS)]}, calls)
    catch_up = catch_up_round_trips(cmd, env, lambda i: {"path": FOLDERS[i % len(FOLDERS)]})
    echo_cmd = [sys.executable, str(HERE / "minimal_server.py")]
    echo = settled_round_trips(echo_cmd, env, "echo", lambda i: {"query": "x"}, calls)
    e50, e95 = percentiles(echo)
    out: list[Row] = []
    for name, samples, target in (
        ("kms_start", start, 50),
        ("kms_list_folder", folder, 10),
        (f"kms_list_folder in a new server's first {CATCH_UP_S:.0f} s (the catch-up scan)", catch_up, 10),
    ):
        p50, p95 = percentiles(samples)
        out.append(
            (
                f"{name} p50 / p95 / max (ms)",
                f"{p50 * 1e3:.1f} / {p95 * 1e3:.1f} / {max(samples) * 1e3:.1f}",
                f"echo {e50 * 1e3:.1f} / {e95 * 1e3:.1f}",
                "",
                f"p95 <= {target} ms",
            )
        )
    return out


TRIGRAM_SQL = "SELECT rowid, snippet(t, 0, '**', '**', '…', 32) FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10"
TRIGRAM_LIKE = "SELECT rowid, snippet(t, 0, '**', '**', '…', 32) FROM t WHERE body LIKE ? LIMIT 10"


def trigram_db(root: Path, n: int) -> Path:
    """What raw FTS5 offers for words in scripts without spaces: a ``trigram`` table over the same notes
    (``unicode61`` reads a run of them as one token and finds none of these queries). Built once per size."""
    import apsw

    path = HERE / "out" / f"scale-trigram-{n}.db"
    if path.exists():
        return path
    part = path.with_suffix(".part")
    part.unlink(missing_ok=True)
    conn = apsw.Connection(str(part))
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram')")
    with conn:
        conn.executemany("INSERT INTO t VALUES (?)", ((p.read_text(encoding="utf-8"),) for p in root.rglob("*.md")))
    conn.close()
    part.rename(path)
    return path


def raw_cjk(conn: Any, word: str) -> list[Any]:
    """The raw trigram search of one word: MATCH from three characters, LIKE below (a trigram index cannot
    serve fewer, so SQLite reads every row: that is what raw FTS5 costs for a two-character word)."""
    if len(word) >= 3:
        return conn.execute(TRIGRAM_SQL, ('"' + word + '"',)).fetchall()
    return conn.execute(TRIGRAM_LIKE, (f"%{word}%",)).fetchall()


def searches(db: Path, raw_db: Path, tri_db: Path) -> list[Row]:
    import apsw

    from server.index.search import build_match, search
    from server.store.db import connect

    conn, raw, tri = connect(db), apsw.Connection(str(raw_db)), apsw.Connection(str(tri_db))
    out: list[Row] = []
    latin = {w: build_match(w)[0] for w in QUERIES}  # made before the clock starts, as kms's own is not

    def trigram(word: str) -> list[Any]:
        return raw_cjk(tri, word)

    groups: list[tuple[str, Sequence[str], Any]] = [
        ("Latin", QUERIES, lambda w: raw.execute(RAW_SQL, (latin[w],)).fetchall()),
        ("CJK/Thai, 3+ characters, against trigram MATCH", [w for w in CJK_QUERIES if len(w) >= 3], trigram),
        ("CJK/Thai, 2 characters, against trigram LIKE", [w for w in CJK_QUERIES if len(w) < 3], trigram),
    ]
    for name, words, base_fn in groups:
        ours: list[float] = []
        base: list[float] = []
        for r in range(10):
            for w in words:
                pair: Sequence[tuple[list[float], Any]] = [
                    (ours, lambda w=w: search(conn, w, 10)),
                    (base, lambda w=w, f=base_fn: f(w)),
                ]
                for samples, fn in pair if r % 2 == 0 else reversed(pair):
                    samples.append(timed(fn))
        o50, o95 = percentiles(ours)
        b50, b95 = percentiles(base)
        out.append((f"search {name} p95 (ms)", f"{o95 * 1e3:.2f}", f"{b95 * 1e3:.2f}", f"{o95 / b95:.2f}x", "<= 1.2x"))
        out.append((f"search {name} p50 (ms)", f"{o50 * 1e3:.2f}", f"{b50 * 1e3:.2f}", f"{o50 / b50:.2f}x", ""))
    for c in (conn, raw, tri):
        c.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--calls-only", action="store_true", help="round trips and searches on the last run's databases")
    args = ap.parse_args()
    os.environ.clear()
    os.environ.update(isolated_env())
    env = isolated_env()
    compile_bytecode(env)
    for n in args.sizes:
        root = with_scripts(vault(n))
        notes = sum(1 for _ in root.rglob("*.md"))
        before = load()
        rows: list[Row]
        if args.calls_only:
            rows, db, raw_db = [], HERE / "out" / f"scale-{n}.db", HERE / "out" / f"scale-raw-{n}.db"
        else:
            rows, db, raw_db = processes(root, n, args.rounds, env)
        rows += round_trips(db, args.calls)
        rows += searches(db, raw_db, trigram_db(root, n))
        table(
            f"scale: {notes} notes ({before} at the start, {load()} at the end; min and range of {args.rounds} rounds)",
            rows,
        )


if __name__ == "__main__":
    main()
