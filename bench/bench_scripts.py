"""Issue 29: what the property and every-script columns (m027) cost, against the tree before them and
the raw FTS5 baseline, on the generated vault plus notes in Chinese, Japanese, Korean and Thai.

Rows: database size before and after (the growth), cold index time, and search p50/p95 of Latin
queries (bench_core's) and of substring queries in those scripts, each beside the bare FTS5 query on
the raw baseline (``raw_index.py``: the same files, one FTS5 table), the queries alternating.

Usage: python bench/bench_scripts.py [--notes N] [--before PATH_TO_OLD_TREE] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import OUT, fresh_db, percentiles, table, timed, vault

CJK_NOTES = 200
TEXTS = (
    "数据库迁移到新的集群，然后检查索引和备份。",
    "データベースの移行について話しました。東京のチームと確認します。",
    "데이터베이스를 새 클러스터로 옮겼다. 백업을 확인했다.",
    "การย้ายฐานข้อมูลไปยังคลัสเตอร์ใหม่และตรวจสอบข้อมูลสำรอง",
)
CJK_QUERIES = ("迁移", "集群", "数据库迁移", "移行", "データ", "클러스터", "데이터베이스", "ฐานข้อมูล", "ย้าย")


def with_scripts(base: Path) -> Path:
    """The generated vault and ``CJK_NOTES`` notes in those scripts, built once."""
    root = OUT / f"scripts-{base.name}"
    if not root.exists():
        shutil.copytree(base, root)
        (root / "scripts").mkdir()
        for i in range(CJK_NOTES):
            text = TEXTS[i % len(TEXTS)]
            (root / "scripts" / f"note-{i}.md").write_text(f"# {text[:6]}\n\n{text}\n\nsee notes {i}\n")
    return root


def measure(tree: str, root: Path, name: str) -> dict[str, Any]:
    """Index ``root`` with the kms in ``tree`` (a subprocess, so two trees never share modules)."""
    code = f"""
import json, sys, time
sys.path.insert(0, {tree!r}); sys.path.insert(1, {str(Path(__file__).parent)!r})
from common import fresh_db
from server.store.db import connect
from server.vault.registry import add_vault
from server.index.indexer import index_vault
from server.index.search import search
path = fresh_db({name!r})
conn = connect(path)
t = time.perf_counter(); index_vault(conn, add_vault(conn, {str(root)!r}, "bench")); cold = time.perf_counter() - t
conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
size = path.stat().st_size
def q(words):
    out = []
    for r in range(10):
        for w in words:
            t = time.perf_counter(); search(conn, w, 10); out.append(time.perf_counter() - t)
    return out
from bench_core import QUERIES
print(json.dumps({{"cold": cold, "size": size, "latin": q(QUERIES), "cjk": q({list(CJK_QUERIES)!r})}}))
"""
    import json

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def raw_times(root: Path) -> tuple[list[float], list[float]]:
    from bench_core import QUERIES
    from raw_index import baseline_index

    from server.index.search import build_match

    conn = baseline_index(str(root), str(fresh_db("raw-scripts.db")))
    sql = "SELECT rowid, snippet(f, 1, '**', '**', '…', 32) FROM f WHERE f MATCH ? ORDER BY rank LIMIT 10"

    def q(words: Sequence[str], plain: bool) -> list[float]:
        out = []
        for _ in range(10):
            for w in words:
                match = f'"{w}"' if plain else build_match(w)[0]
                out.append(timed(lambda m=match: conn.execute(sql, (m,)).fetchall()))
        return out

    return q(QUERIES, False), q(CJK_QUERIES, True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--before", help="a checkout of kms before m027 (git archive), for the size growth")
    args = ap.parse_args()
    root = with_scripts(vault(args.notes))
    here = str(Path(__file__).resolve().parent.parent)
    ours = measure(here, root, "scripts-after.db")
    before = measure(args.before, root, "scripts-before.db") if args.before else None
    raw_latin, raw_cjk = raw_times(root)
    ms = 1000
    rows = []
    if before:
        growth = ours["size"] / before["size"] - 1
        rows.append(
            (
                "database (MB)",
                f"{ours['size'] / 1e6:.1f}",
                f"{before['size'] / 1e6:.1f} (before)",
                f"+{growth:.1%}",
                "reported",
            )
        )
        rows.append(
            (
                "cold index (s)",
                f"{ours['cold']:.2f}",
                f"{before['cold']:.2f} (before)",
                f"{ours['cold'] / before['cold']:.2f}x",
                "",
            )
        )
    for label, mine, raw in (("Latin", ours["latin"], raw_latin), ("CJK/Thai", ours["cjk"], raw_cjk)):
        o50, o95 = percentiles(mine)
        b50, b95 = percentiles(raw)
        rows.append((f"search {label} p50 (ms)", f"{o50 * ms:.2f}", f"{b50 * ms:.2f}", f"{o50 / b50:.2f}x", ""))
        rows.append((f"search {label} p95 (ms)", f"{o95 * ms:.2f}", f"{b95 * ms:.2f}", f"{o95 / b95:.2f}x", "<= 1.2x"))
    if before:
        b50, b95 = percentiles(before["latin"])
        o50, o95 = percentiles(ours["latin"])
        rows.append(("search Latin p95 vs before (ms)", f"{o95 * ms:.2f}", f"{b95 * ms:.2f}", f"{o95 / b95:.2f}x", ""))
    table(f"every script: {args.notes} + {CJK_NOTES} notes; load {os.getloadavg()[0]:.1f}", rows)


if __name__ == "__main__":
    main()
