"""Note history benchmark (issue 28): what keeping every version costs in space and time, against the same
work with ``history.enabled`` off, measured in the same run (the machine is shared: ranges over runs, load
average printed).

- growth: 1,000 notes of ~6 KB (``genvault.generate``), then 1,000 one-line edits, one per note, each
  seen as the watcher sees a save (``reindex_file``): the history tables' growth (``dbstat``) ≤ 1 MB.
- cold: the 10k-note vault of ``../shared/tools/genvault.py``: the history tables after a cold
  ``kms vault add`` ≤ 40 % of the vault's bytes; the whole ``kms vault add`` process with history on,
  off, and the raw FTS5 baseline process (``raw_index.py``), alternating, ≤ 1.5× the baseline.
- save: a save seen by the watcher (``reindex_file`` of an edited 6 KB note), history on against off,
  alternating blocks: ≤ 2 ms more.
- history: ``kms history``'s work (``find_line`` + ``versions``, the 50 newest as the command shows and
  all) on a note with 1,000 versions ≤ 50 ms.
- restore: ``preview_restore`` + ``restore`` of version 500 of that note against the same write without
  history (``multifile.apply_plans`` of the same bytes as the person): ≤ 20 ms more.

    python bench/bench_history.py [--runs 3] [--skip-cold]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import apsw
from common import HERE, OUT, fresh_db, table

SHARED_GENVAULT = HERE.parent.parent / "shared" / "tools" / "genvault.py"


def settings(path: Path, on: bool) -> None:
    path.write_text(f"[history]\nenabled = {'true' if on else 'false'}\n")
    st = path.stat()  # a new mtime each time, even within one clock tick: the setting is re-read
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))


def history_bytes(conn: apsw.Connection) -> int:
    [(size,)] = conn.execute(
        "SELECT coalesce(sum(pgsize), 0) FROM dbstat "
        "WHERE name LIKE 'history%' OR name LIKE 'sqlite_autoindex_history%'"
    ).fetchall()
    return cast(int, size)  # coalesce(sum(...), 0): always an integer


def same_text(text: str) -> Callable[[str], str]:
    """A plan's compute that writes ``text`` whatever the file held (a write of the same bytes as a restore)."""
    return lambda _current: text


def growth_and_timings(run: int) -> dict[str, float]:
    from genvault import generate

    from server.activity.note_history import find_line, versions
    from server.index.incremental import reindex_file
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault
    from server.writes.context import WriteContext
    from server.writes.multifile import apply_plans
    from server.writes.undo.restore import preview_restore, restore
    from server.writes.unit_files import FilePlan

    cfg = Path(os.environ["KMS_CONFIG"])
    settings(cfg, True)
    root = OUT / f"history-vault-{run}"
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    paths = [p.relative_to(root).as_posix() for p in generate(root, 1000, seed=100 + run)]
    conn = connect(fresh_db(f"history-{run}.db"))
    vault = add_vault(conn, root, "h")
    index_vault(conn, vault)
    before = history_bytes(conn)
    for i, rel in enumerate(paths):  # one line added in the middle of every note
        full = root / rel
        data = full.read_bytes()
        mid = data.find(b"\n", len(data) // 2) + 1
        full.write_bytes(data[:mid] + f"an edit, line {i}\n".encode() + data[mid:])
        reindex_file(conn, vault, rel)
    grown = history_bytes(conn) - before

    # a save seen by the watcher, history on and off in alternating blocks
    on_t: list[float] = []
    off_t: list[float] = []
    target = root / paths[0]
    for block in range(10):
        on = block % 2 == 0
        settings(cfg, on)
        for k in range(20):
            data = target.read_bytes()
            target.write_bytes(data + f"save {block}-{k}\n".encode())
            start = time.perf_counter()
            reindex_file(conn, vault, paths[0])
            (on_t if on else off_t).append(time.perf_counter() - start)
    settings(cfg, True)

    # a note with 1,000 versions
    many = root / paths[1]
    base = many.read_bytes()
    for k in range(999):
        many.write_bytes(base + f"version {k}\n".encode())
        reindex_file(conn, vault, paths[1])
    hist50: list[float] = []
    hist_all: list[float] = []
    for _ in range(15):
        start = time.perf_counter()
        versions(conn, find_line(conn, paths[1]), limit=50)
        hist50.append(time.perf_counter() - start)
        start = time.perf_counter()
        versions(conn, find_line(conn, paths[1]))
        hist_all.append(time.perf_counter() - start)

    # restore against the same write without history
    rest: list[float] = []
    write: list[float] = []
    for k in range(10):
        start = time.perf_counter()
        plan = preview_restore(conn, paths[1], number=500)
        restore(conn, paths[1], number=500, expect=plan["expect"])
        rest.append(time.perf_counter() - start)
        text = (base + f"back {k}\n".encode()).decode()
        start = time.perf_counter()
        apply_plans(WriteContext.for_person(conn), vault, [FilePlan(paths[1], same_text(text))])
        write.append(time.perf_counter() - start)
    conn.close()
    return {
        "grown": grown,
        "save_on": statistics.median(on_t),
        "save_off": statistics.median(off_t),
        "save_on_p95": sorted(on_t)[int(0.95 * (len(on_t) - 1))],
        "save_off_p95": sorted(off_t)[int(0.95 * (len(off_t) - 1))],
        "hist50": statistics.median(hist50),
        "hist_all": statistics.median(hist_all),
        "restore": statistics.median(rest),
        "write": statistics.median(write),
    }


def cold_rows(rounds: int) -> list[tuple[str, str, str, str, str]]:
    from server.store.db import connect

    shared = OUT / "shared-vault-10000"
    if not (shared / ".complete").exists():
        subprocess.run([sys.executable, str(SHARED_GENVAULT), str(shared), "--notes", "10000"], check=True)
        (shared / ".complete").write_text("ok")
    vault_bytes = sum(p.stat().st_size for p in shared.rglob("*.md"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMS_")}
    on_cfg, off_cfg = OUT / "history-on.toml", OUT / "history-off.toml"
    settings(on_cfg, True)
    settings(off_cfg, False)
    times: dict[str, list[float]] = {"raw": [], "on": [], "off": []}
    sizes: list[int] = []
    for r in range(rounds):
        steps = [
            ("raw", [sys.executable, str(HERE / "raw_index.py"), str(shared), str(fresh_db("raw-h.db"))], None),
            ("on", [sys.executable, "-m", "kmscli", "vault", "add", str(shared), "--name", "b"], on_cfg),
            ("off", [sys.executable, "-m", "kmscli", "vault", "add", str(shared), "--name", "b"], off_cfg),
        ]
        for name, cmd, cfg in steps if r % 2 == 0 else reversed(steps):
            run_env = dict(env)
            if cfg is not None:
                run_env["KMS_CONFIG"], run_env["KMS_DB_PATH"] = str(cfg), str(fresh_db(f"cold-{name}.db"))
            start = time.perf_counter()
            subprocess.run(cmd, env=run_env, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
        conn = connect(OUT / "cold-on.db")
        sizes.append(history_bytes(conn))
        conn.close()
    ratio_on = sorted(a / b for a, b in zip(times["on"], times["raw"], strict=True))
    ratio_off = sorted(a / b for a, b in zip(times["off"], times["raw"], strict=True))
    return [
        (
            "first versions of a cold 10k index / vault bytes",
            f"{min(sizes) / 1e6:.1f} MB",
            f"{vault_bytes / 1e6:.1f} MB",
            f"{min(sizes) / vault_bytes:.0%}",
            "≤ 40 %",
        ),
        (
            "cold `kms vault add` (process), history on",
            f"{min(times['on']):.2f} s ({min(times['on']):.2f}-{max(times['on']):.2f})",
            f"{min(times['raw']):.2f} s raw",
            f"{min(times['on']) / min(times['raw']):.2f}x (paired {ratio_on[0]:.2f}-{ratio_on[-1]:.2f}x)",
            "≤ 1.5x",
        ),
        (
            "the same, history off (same runs)",
            f"{min(times['off']):.2f} s ({min(times['off']):.2f}-{max(times['off']):.2f})",
            f"{min(times['raw']):.2f} s raw",
            f"{min(times['off']) / min(times['raw']):.2f}x (paired {ratio_off[0]:.2f}-{ratio_off[-1]:.2f}x)",
            "",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-cold", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    os.environ["KMS_CONFIG"] = str(OUT / "history-bench.toml")
    load_before = os.getloadavg()
    runs = [growth_and_timings(r) for r in range(args.runs)]

    def span(key: str, scale: float = 1000.0, unit: str = "ms") -> str:
        vals = [r[key] * scale for r in runs]
        return f"{min(vals):.2f}-{max(vals):.2f} {unit}"

    diffs = [(r["save_on"] - r["save_off"]) * 1000 for r in runs]
    extra = [(r["restore"] - r["write"]) * 1000 for r in runs]
    rows = [
        ("history growth, 1,000 one-line edits over 1,000 ~6 KB notes", span("grown", 1e-6, "MB"), "", "", "≤ 1 MB"),
        (
            "a save seen by the watcher, median (p95)",
            f"{span('save_on')} ({span('save_on_p95')})",
            f"{span('save_off')} ({span('save_off_p95')}) off",
            f"+{min(diffs):.2f} to +{max(diffs):.2f} ms",
            "≤ +2 ms",
        ),
        ("`kms history` (50 newest) on 1,000 versions", span("hist50"), "", "", "≤ 50 ms"),
        ("all 1,000 versions", span("hist_all"), "", "", ""),
        (
            "`kms restore` (preview + restore) vs the same write",
            span("restore"),
            f"{span('write')} write",
            f"+{min(extra):.2f} to +{max(extra):.2f} ms",
            "≤ +20 ms",
        ),
    ]
    table(f"Note history ({args.runs} runs; load average before {load_before}, after {os.getloadavg()})", rows)
    if not args.skip_cold:
        load_before = os.getloadavg()
        cold = cold_rows(args.runs)
        table(f"Cold index ({args.runs} rounds; load average before {load_before}, after {os.getloadavg()})", cold)


if __name__ == "__main__":
    main()
