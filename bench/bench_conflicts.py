"""What telling conflict copies apart costs a cold index (issue 41: "nothing measurable").

Every file a scan finds is read by name once (``server.index.conflicts.split_copies``: a few substring tests,
then one regular-expression match for the rare name that passes them; iCloud's and OneDrive's names also ask
whether the note is beside them). This measures, on the 10k-note bench vault:

- that check alone over the scan's files, for a vault with no sync tool and for the worst case (iCloud and
  OneDrive on: more names to try), median of ``--repeat`` runs;
- a cold index of the same vault (``index_vault`` into a fresh database), median of ``--cold`` runs, and the
  check's share of it;
- a cold index with 100 conflict copies among the notes (what quarantining them costs on top).

Usage: python bench/bench_conflicts.py [--notes N] [--repeat R] [--cold C]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

from common import OUT, fresh_db, table, vault

from server.index import conflicts
from server.index.indexer import index_vault
from server.index.records import scan
from server.store.db import connect
from server.vault.conflict_names import CopyNames
from server.vault.registry import add_vault


def _split_ms(root, names: CopyNames, repeat: int) -> float:
    files, _unreadable, _errors = scan(root, [])
    samples = []
    for _ in range(repeat):
        batch = dict(files)
        started = time.perf_counter()
        conflicts.split_copies(names, batch, [])
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _cold_s(root, runs: int, name: str) -> float:
    samples = []
    for _ in range(runs):
        db = fresh_db(name)
        conn = connect(db)
        v = add_vault(conn, root, "bench")
        started = time.perf_counter()
        index_vault(conn, v)
        samples.append(time.perf_counter() - started)
        conn.close()
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--cold", type=int, default=3)
    args = parser.parse_args()
    root = vault(args.notes)
    load = os.getloadavg()[0]
    plain = _split_ms(root, CopyNames.of(""), args.repeat)
    worst = _split_ms(root, CopyNames.of("icloud,onedrive"), args.repeat)
    cold = _cold_s(root, args.cold, "conflicts-cold.db")
    with_copies = OUT / f"vault-{args.notes}-copies"
    if not with_copies.exists():
        shutil.copytree(root, with_copies)
        notes = sorted(p for p in with_copies.rglob("*.md"))[:100]
        for p in notes:
            shutil.copy(p, p.with_name(p.stem + ".sync-conflict-20261201-101500-ABCDEFG.md"))
    cold_copies = _cold_s(with_copies, args.cold, "conflicts-copies.db")
    table(
        f"conflict copies in a cold index of {args.notes} notes (load {load:.1f})",
        [
            (
                "name check, no sync tool",
                f"{plain:.1f} ms",
                f"{cold * 1000:.0f} ms cold index",
                f"{plain / cold / 10:.2f} %",
                "nothing measurable",
            ),
            (
                "name check, iCloud + OneDrive",
                f"{worst:.1f} ms",
                f"{cold * 1000:.0f} ms cold index",
                f"{worst / cold / 10:.2f} %",
                "",
            ),
            (
                "cold index with 100 copies",
                f"{cold_copies * 1000:.0f} ms",
                f"{cold * 1000:.0f} ms",
                f"{cold_copies / cold:.3f}×",
                "",
            ),
        ],
    )


if __name__ == "__main__":
    main()
