"""What the rolling backup costs an agent's call (issue 37: "the backup costs no agent call more than 1 ms").

The service copies its database once a day, after the vault's files have been still for 30 s, on a thread of
its own, a few pages a step (``server.store.backup``): by design no call overlaps it. This bench takes the
worst case anyway, calls that come while a copy runs, in one process as in the service: ``kms_append``
through a session's ``ToolRunner`` (the guard, the file's fsync, the index, the provenance) on the main
thread, and copies of the same database made back to back by ``make_backup`` (the service's own function) on
another, in alternating blocks with and without copies. A call counts as during a copy when one was under
way as it began and as it ended. Reported: p50, p95 and max of each, the difference, and the machine's load.

Usage: python bench/bench_backup.py [--notes N] [--calls N] [--blocks N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import threading
import time

from common import HERE, fresh_db, percentiles, vault


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=40, help="calls a block")
    ap.add_argument("--blocks", type=int, default=10, help="blocks of each kind, alternating")
    args = ap.parse_args()

    source = vault(args.notes)
    root = HERE / "out" / f"backup-vault-{args.notes}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(source, root)
    db = fresh_db(f"backup-{args.notes}.db")
    config = HERE / "out" / "backup-config.toml"
    config.write_text("[agent]\nwrite = true\n\n[backup]\nenabled = false\n")  # copies made here, not by a watcher
    for key in [k for k in os.environ if k.startswith("KMS_")]:
        del os.environ[key]
    os.environ.update(
        {
            "KMS_DB_PATH": str(db),
            "KMS_CONFIG": str(config),
            "KMS_EMBED_ENABLED": "0",
            "KMS_WRITE_PER_MINUTE": "10000",
            "KMS_WRITE_PER_SESSION": "1000000",
        }
    )

    from server.config.session_contract import SessionConfig
    from server.index.indexer import index_vault
    from server.mcp.tools.dispatch import ToolRunner
    from server.store.backup import backup_folder, make_backup
    from server.store.db import connect
    from server.vault.registry import add_vault

    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "bench"))
    ids = [r[0] for r in conn.execute("SELECT id FROM notes ORDER BY path LIMIT 50")]
    conn.close()
    size_mb = os.path.getsize(db) / 1e6
    runner = ToolRunner(SessionConfig.from_env(dict(os.environ), watch=False), None)

    copying = threading.Event()
    idle = threading.Event()  # no copy under way
    idle.set()
    stop = threading.Event()
    copies: list[float] = []

    def copy_while_asked() -> None:
        while not stop.is_set():
            if not copying.wait(0.05):
                continue
            idle.clear()
            started = time.perf_counter()
            make_backup(db, keep=1)
            copies.append(time.perf_counter() - started)
            idle.set()

    copier = threading.Thread(target=copy_while_asked, daemon=True)
    copier.start()
    plain: list[float] = []
    during: list[float] = []
    n = 0

    def append() -> None:
        nonlocal n
        n += 1
        answer, failed = runner.call("kms_append", {"noteId": ids[n % len(ids)], "content": f"- line {n}"})
        assert not failed, answer

    try:
        for _ in range(5):
            append()
        for block in range(2 * args.blocks):
            with_copy = block % 2 == 1
            if with_copy:
                copying.set()
                time.sleep(0.05)  # the wait is the bench: the copy is under way when the calls come
            for _ in range(args.calls):
                copy_before = not idle.is_set()
                started = time.perf_counter()
                append()
                took = time.perf_counter() - started
                if copy_before and not idle.is_set():
                    during.append(took)
                elif not with_copy and not copy_before and idle.is_set():
                    plain.append(took)
            copying.clear()
            idle.wait(120)
    finally:
        stop.set()
        copier.join(120)
        runner.close()
        shutil.rmtree(backup_folder(db), ignore_errors=True)

    (p50a, p95a), (p50b, p95b) = percentiles(plain), percentiles(during)
    print(
        f"\nkms_append while the database ({size_mb:.0f} MB, {args.notes} notes) is copied, in one process: "
        f"{len(plain)} + {len(during)} calls, {len(copies)} copies (median {statistics.median(copies or [0]):.2f} s), "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'':10}{'no copy':>16}{'during a copy':>16}{'difference':>16}")
    for name, a, b in (("p50 (ms)", p50a, p50b), ("p95 (ms)", p95a, p95b), ("max (ms)", max(plain), max(during))):
        target = "   (target: <= +1 ms)" if name == "p50 (ms)" else ""
        print(f"{name:10}{a * 1000:>16.2f}{b * 1000:>16.2f}{(b - a) * 1000:>+16.2f}{target}")


if __name__ == "__main__":
    main()
