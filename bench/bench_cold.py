"""Issue 42, a new vault searchable first and the cold index cheaper: ``kms vault add`` against the raw baseline
(``raw_index.py``: read every file, insert it into an FTS5 table) in the same run, and against the code before
the change (``--old``: a checkout of it with its own venv) in the same rounds. The machine is shared: the load
average is printed before and after, and ratios paired within a round are what count.

Per round (the order of raw, old and new rotates from round to round), each a whole process:
- searchable: from starting ``kms vault add`` to the first keyword hit on a word only the vault's last note
  holds (another connection polls the database every 5 ms), and the CPU of the process and its workers at
  that moment; the raw baseline is searchable when it ends (one transaction);
- complete: the process's wall and CPU (its reaped worker processes included);
- no-change ``kms index`` against the start-up every command pays (``kms --version``) + 0.3 s; the first one
  after ``vault add`` also makes the day's copy of the database (docs/recovery.md), reported on its own.

Usage: python bench/bench_cold.py --vault DIR [--old /path/to/old/checkout] [--rounds 5]
(a vault: ``python3 /work/shared/tools/genvault.py DIR --notes 10000``, or ``bench/genvault.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import apsw
import psutil
from bench_core import compile_bytecode, isolated_env
from common import HERE, OUT, fresh_db, table

NEUTRAL = OUT  # every kms process starts here: ``python -m kmscli`` run in a checkout would import that checkout


def run(cmd: list[str], env: dict[str, str], cpu: list[float] | None = None) -> float:
    """Wall time of one whole process (its CPU, worker processes included, into ``cpu``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=NEUTRAL, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    if status:
        raise SystemExit(f"{' '.join(cmd)} failed ({status})")
    if cpu is not None:
        cpu.append(usage.ru_utime + usage.ru_stime)
    return took


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def last_note_word(root: Path) -> tuple[str, str]:
    """(path, word) of the vault's last note (by path) and the word of it fewest other notes hold."""
    paths = sorted(p for p in root.rglob("*.md") if not any(part.startswith(".") for part in p.parts))
    words = [set(re.findall(r"[a-z]{5,}", p.read_text(errors="replace").lower())) for p in paths]
    seen = Counter(w for ws in words for w in ws)
    last = paths[-1]
    return last.relative_to(root).as_posix(), min(sorted(words[-1]), key=lambda w: seen[w])


def cpu_of(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def vault_add(python: str, root: Path, env: dict[str, str], db: Path, path: str, word: str) -> dict[str, float]:
    """One ``kms vault add`` process: when the last note was first found by its word, and the totals."""
    env = {**env, "KMS_DB_PATH": str(db)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [python, "-m", "kmscli", "vault", "add", str(root), "--name", "bench"],
        env=env,
        cwd=NEUTRAL,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    watched = psutil.Process(proc.pid)
    found_at = found_cpu = None
    conn = None
    query = "SELECT n.path FROM notes_fts f JOIN notes n ON n.rid = f.rowid WHERE notes_fts MATCH ?"
    while proc.poll() is None and found_at is None:
        time.sleep(0.005)
        try:
            if conn is None:
                if not db.exists():
                    continue
                conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            if any(r[0] == path for r in conn.execute(query, (word,))):
                found_at = time.perf_counter() - start
                found_cpu = cpu_of(watched)
        except apsw.Error:
            continue  # not created yet, or locked for a moment
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    if status:
        raise SystemExit(
            f"kms vault add failed ({status}): {proc.stderr.read().decode()[-800:] if proc.stderr else ''}"
        )
    if conn is None:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    if found_at is None:  # ended before a poll saw it: searchable when it ended
        assert any(r[0] == path for r in conn.execute(query, (word,))), "the last note is not found"
        found_at, found_cpu = took, usage.ru_utime + usage.ru_stime
    conn.close()
    return {
        "searchable": found_at,
        "searchable_cpu": float(found_cpu or 0.0),
        "wall": took,
        "cpu": usage.ru_utime + usage.ru_stime,
    }


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def spread(xs: list[float]) -> str:
    return f"{median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def ratio(a: list[float], b: list[float]) -> str:
    paired = sorted(x / y for x, y in zip(a, b, strict=True))
    return f"{median(paired):.2f}x ({paired[0]:.2f}-{paired[-1]:.2f}x)"


def versus(ours: list[float], base: list[float]) -> tuple[str, str, str]:
    return spread(ours), spread(base), ratio(ours, base)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, required=True)
    ap.add_argument("--old", type=Path, default=None, help="a checkout of the old code with its .venv")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    root = args.vault.resolve()
    n = sum(1 for _ in root.rglob("*.md"))
    path, word = last_note_word(root)
    env = isolated_env()
    compile_bytecode(env)
    kinds = {"new": sys.executable}
    if args.old:
        kinds["old"] = str(args.old / ".venv" / "bin" / "python")
        subprocess.run(
            [kinds["old"], "-m", "compileall", "-q", str(args.old / "server"), str(args.old / "kmscli")], check=True
        )
    print(f"{n} notes; last note {path!r}, word {word!r}; {load()}; {os.cpu_count()} CPUs", flush=True)
    raw: dict[str, list[float]] = {"wall": [], "cpu": []}
    got: dict[str, dict[str, list[float]]] = {k: {} for k in kinds}
    noop: dict[str, list[float]] = {k: [] for k in kinds}
    daily: dict[str, list[float]] = {k: [] for k in kinds}
    start: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        steps = ["raw", *kinds]
        steps = steps[r % len(steps) :] + steps[: r % len(steps)]
        for step in steps:
            if step == "raw":
                cpu: list[float] = []
                raw["wall"].append(
                    run(
                        [sys.executable, str(HERE / "raw_index.py"), str(root), str(fresh_db(f"cold-raw-{n}.db"))],
                        env,
                        cpu,
                    )
                )
                raw["cpu"].append(cpu[0])
                continue
            db = fresh_db(f"cold-{step}-{n}.db")
            for key, value in vault_add(kinds[step], root, env, db, path, word).items():
                got[step].setdefault(key, []).append(value)
            e = {**env, "KMS_DB_PATH": str(db)}
            cmd = [kinds[step], "-m", "kmscli"]
            flags = ["--no-embed"]  # (both have it: the raw baseline computes no embeddings)
            for i in range(3):  # the first after ``vault add`` also makes the day's copy of the database
                (daily if i == 0 else noop)[step].append(run([*cmd, "index", *flags], e))
                start[step].append(run([*cmd, "--version"], e))
        print(f"round {r + 1}/{args.rounds} done; {load()}", flush=True)
    rows = [
        ("raw baseline, wall (s)", spread(raw["wall"]), "", "", ""),
        ("raw baseline, CPU (s)", spread(raw["cpu"]), "", "", ""),
    ]
    for k in kinds:
        g = got[k]
        floor = min(start[k]) + 0.3
        rows += [
            (f"{k}: vault add -> last note found, wall (s)", *versus(g["searchable"], raw["wall"]), "<= 1.2x"),
            (f"{k}: CPU until searchable (s)", *versus(g["searchable_cpu"], raw["cpu"]), "<= 2.2x"),
            (f"{k}: vault add, whole, wall (s)", *versus(g["wall"], raw["wall"]), ""),
            (f"{k}: vault add, whole, CPU (s)", *versus(g["cpu"], raw["cpu"]), "<= 2.5x"),
            (
                f"{k}: kms index, no change (s)",
                spread(noop[k]),
                f"start-up + 0.3 = {floor:.2f}",
                "",
                "ok" if median(noop[k]) <= floor else "over",
            ),
            (f"{k}: the first, with the day's copy of the database (s)", spread(daily[k]), "", "", "reported"),
        ]
    table(f"Cold index, {n} notes, {args.rounds} rounds (median (min-max); ratios paired per round); {load()}", rows)


if __name__ == "__main__":
    main()
