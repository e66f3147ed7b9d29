"""What the rolling backup costs an agent's call (issue 37: "the backup costs no agent call more than 1 ms").

The service copies its database once a day, after the vault's files have been still for 30 s, on a thread of
its own, a few pages a step (``server.store.backup``): by design no call overlaps it. This bench takes the worst
case anyway, a call that arrives while a copy runs: ``kms_append`` round trips to a real ``kms mcp`` over stdio
(lean client: one line out, one line in) on the generated vault, in alternating blocks with and without copies
of the same database being made back to back (``make_backup``, the service's own function, on a thread of
this process: its steps run in SQLite with the interpreter released, so this is the service's case without the
service's timers). Reported: p50, p95 and max of each, and the difference, with the machine's load.

Usage: python bench/bench_backup.py [--notes N] [--calls N] [--blocks N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import threading
import time

from bench_mcp import LeanClient
from common import HERE, fresh_db, percentiles, vault


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=20, help="calls a block")
    ap.add_argument("--blocks", type=int, default=20, help="blocks of each kind, alternating")
    args = ap.parse_args()

    from server.index.indexer import index_vault
    from server.store.backup import backup_folder, make_backup
    from server.store.db import connect
    from server.vault.registry import add_vault

    source = vault(args.notes)
    root = HERE / "out" / f"backup-vault-{args.notes}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(source, root)
    db = fresh_db(f"backup-{args.notes}.db")
    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "bench"))
    ids = [r[0] for r in conn.execute("SELECT id FROM notes ORDER BY path LIMIT 50")]
    conn.close()
    size_mb = os.path.getsize(db) / 1e6
    config = HERE / "out" / "backup-config.toml"
    config.write_text("[agent]\nwrite = true\n\n[backup]\nenabled = false\n")  # copies made here, not by it
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("KMS_")},
        "KMS_DB_PATH": str(db),
        "KMS_CONFIG": str(config),
        "KMS_EMBED_ENABLED": "0",
        "KMS_WRITE_PER_MINUTE": "10000",
        "KMS_WRITE_PER_SESSION": "1000000",
    }
    client = LeanClient([sys.executable, "-m", "kmscli", "mcp"], env)
    copying = threading.Event()
    stop = threading.Event()
    copies: list[float] = []

    def copy_while_asked() -> None:
        while not stop.is_set():
            if not copying.wait(0.05):
                continue
            started = time.perf_counter()
            make_backup(db, keep=1)
            copies.append(time.perf_counter() - started)

    copier = threading.Thread(target=copy_while_asked, daemon=True)
    copier.start()
    plain: list[float] = []
    during: list[float] = []
    n = 0
    try:
        for _ in range(5):
            client.call("kms_append", {"noteId": ids[0], "content": "- warm"})
        for block in range(2 * args.blocks):
            with_copy = block % 2 == 1
            if with_copy:
                copying.set()
                time.sleep(0.05)  # the wait is the bench: the copy is under way when the calls come
            for _ in range(args.calls):
                n += 1
                started = time.perf_counter()
                client.call("kms_append", {"noteId": ids[n % len(ids)], "content": f"- line {n}"})
                (during if with_copy else plain).append(time.perf_counter() - started)
            copying.clear()
    finally:
        stop.set()
        copier.join(120)
        client.close()
        shutil.rmtree(backup_folder(db), ignore_errors=True)
    (p50a, p95a), (p50b, p95b) = percentiles(plain), percentiles(during)
    print(
        f"\nkms_append while the database ({size_mb:.0f} MB, {args.notes} notes) is copied: stdio, "
        f"{len(plain)} + {len(during)} calls, {len(copies)} copies (median {statistics.median(copies or [0]):.2f} s), "
        f"load {os.getloadavg()[0]:.1f}"
    )
    rows = [
        ("", "no copy", "during a copy", "difference"),
        ("p50 (ms)", p50a, p50b, p50b - p50a),
        ("p95 (ms)", p95a, p95b, p95b - p95a),
        ("max (ms)", max(plain), max(during), max(during) - max(plain)),
    ]
    for name, *values in rows:
        cells = [
            v if isinstance(v, str) else f"{v * 1000:+.2f}" if i == 2 else f"{v * 1000:.2f}"
            for i, v in enumerate(values)
        ]
        print(
            f"{name:10}" + "".join(f"{c:>16}" for c in cells) + ("   (target: <= +1 ms)" if name == "p50 (ms)" else "")
        )


if __name__ == "__main__":
    main()
