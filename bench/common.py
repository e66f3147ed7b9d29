"""Small helpers shared by the benchmarks: the cached vault, timing and the result table."""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
OUT = HERE / "out"


def vault(notes: int = 10_000) -> Path:
    """The deterministic generated vault, built once and cached under bench/out/."""
    from genvault import generate

    path = OUT / f"vault-{notes}"
    marker = path / ".complete"
    if not marker.exists():
        shutil.rmtree(path, ignore_errors=True)
        generate(path, notes)
        marker.write_text("ok")
    return path


def fresh_db(name: str) -> Path:
    """A database path with nothing at it: no database, and none of the files kms keeps beside one (the vault
    registrations a lost database is rebuilt from, the rolling backups), which would bring its vaults back."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(path) + suffix):
            os.remove(str(path) + suffix)
    try:  # (after HERE's parent is on sys.path)
        from server.store.backup import backup_folder
        from server.store.registrations import registrations_path
    except ImportError:  # the code of a comparison run from before they existed: it keeps neither
        return path
    registrations_path(path).unlink(missing_ok=True)
    shutil.rmtree(backup_folder(path), ignore_errors=True)
    return path


def timed(fn: Callable[..., object]) -> float:
    """``fn()``'s wall time (``...``: a lambda may bind a loop variable as a default)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95


def table(title: str, rows: list[tuple[str, str, str, str, str]]) -> None:
    """rows: (metric, ours, baseline, ratio, target/verdict)."""
    head = ("metric", "kms", "baseline", "ratio", "target")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(5)]
    print(f"\n{title}")
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


def rss_mb(pid: int | None = None) -> float:
    import psutil

    return psutil.Process(pid or os.getpid()).memory_info().rss / 1e6
