"""Sessions in one process: a write that is held up holds up no other session (issue 24).

One ``SessionHub`` serves two sessions over the generated 10k-note vault, each through its own real
in-memory SDK client connected to the same server object. Session B's read round trips (``kms_search``,
``kms_read``) are timed twice in the same run:

- idle: nothing else happens (the baseline);
- held: session A's ``kms_append`` waits on a note another writer holds locked for the whole measurement
  (as when a person's editor or another kms process is writing it).

Target: B's read p95 while A's write is held stays within 1.5x of B's idle p95. Then the same for
A's own reads while its write is held (a session's reads never wait on its writes).

Usage: python bench/bench_sessions.py [--notes N] [--calls N] [--runs N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path
from typing import Any, cast

import anyio
from bench_mcp import QUERIES  # the same words as the stdio benchmark
from common import fresh_db, percentiles, table, vault


async def reads(client: Any, note_ids: list[str], calls: int) -> list[float]:
    out = []
    for i in range(calls):
        name, args = (
            ("kms_search", {"query": QUERIES[i % len(QUERIES)]})
            if i % 2 == 0
            else ("kms_read", {"noteId": note_ids[i % len(note_ids)]})
        )
        t = time.perf_counter()
        result = await client.call_tool(name, args)
        out.append(time.perf_counter() - t)
        assert not result.is_error, result
    return out


async def measure(db: Path, calls: int) -> dict[str, list[float]]:
    from mcp.client import Client

    from server.config.session_contract import SessionConfig
    from server.mcp.hub import SessionHub
    from server.mcp.process import ProcessServices
    from server.mcp.serve import build_server
    from server.store.db import connect
    from server.store.locks import file_lock
    from server.writes.context import lock_dir_for

    def config(session_id: str) -> SessionConfig:
        return SessionConfig(
            db_path=db,
            config_path=db.parent / "bench-config.toml",
            enabled=True,
            read_enabled=True,
            write_enabled=True,
            session_id=session_id,
            per_minute=10_000,
            per_session=1_000_000,
            embed_enabled=False,
            watch=False,
        )

    conn = connect(db)
    found = conn.execute(
        "SELECT n.id, v.root || '/' || n.path FROM notes n JOIN vaults v ON v.id = n.vault_id ORDER BY n.id LIMIT 50"
    ).fetchall()
    rows = cast(list[tuple[str, str]], found)
    note_ids = [r[0] for r in rows]
    held_id, held_file = rows[0]
    hub = SessionHub(ProcessServices.for_config(config("sbenchA000000")))
    a, b = hub.open(config("sbenchA000000")), hub.open(config("sbenchB000000"))
    server = build_server(hub)
    r: dict[str, list[float]] = {}
    original = Path(held_file).read_bytes()
    try:
        async with contextlib.AsyncExitStack() as stack:
            with hub.connection(a):
                ca = await stack.enter_async_context(Client(server))
            with hub.connection(b):
                cb = await stack.enter_async_context(Client(server))
            await reads(cb, note_ids, 20)  # warm-up
            await reads(ca, note_ids, 20)
            r["b_idle"] = await reads(cb, note_ids, calls)
            r["a_idle"] = await reads(ca, note_ids, calls)
            lock = contextlib.ExitStack()
            lock.enter_context(file_lock(Path(held_file), lock_dir_for(conn)))
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ca.call_tool, "kms_append", {"noteId": held_id, "content": "- held"})
                    await anyio.sleep(0.2)  # A's write now waits for the lock
                    r["b_held"] = await reads(cb, note_ids, calls)
                    r["a_held"] = await reads(ca, note_ids, calls)
                    lock.close()
            finally:
                lock.close()
    finally:
        hub.close_all()
        Path(held_file).write_bytes(original)
        conn.close()
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    root = vault(args.notes)
    db = fresh_db("sessions.db")
    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "bench"))
    conn.close()
    os.environ.setdefault("KMS_CONFIG", str(db.parent / "bench-config.toml"))
    rows = []
    ratios: dict[str, list[float]] = {"b": [], "a": []}
    load = os.getloadavg()[0]
    for run in range(args.runs):
        r = anyio.run(measure, db, args.calls)
        for who in ("b", "a"):
            idle, held = percentiles(r[f"{who}_idle"])[1], percentiles(r[f"{who}_held"])[1]
            ratios[who].append(held / idle)
            label = "B (another session)" if who == "b" else "A (its own reads)"
            rows.append(
                (
                    f"run {run + 1}: {label} read p95 (ms)",
                    f"{held * 1000:.2f} held",
                    f"{idle * 1000:.2f} idle",
                    f"{held / idle:.2f}x",
                    "<= 1.5x",
                )
            )
    for who, label in (("b", "B"), ("a", "A")):
        lo, hi = min(ratios[who]), max(ratios[who])
        rows.append(
            (f"{label}: ratio over {args.runs} runs", "", "", f"{lo:.2f}-{hi:.2f}x", "PASS" if hi <= 1.5 else "FAIL")
        )
    table(
        f"Sessions in one process: {args.notes} notes, {args.calls} reads per phase, load average "
        f"{load:.1f} at the start",
        rows,
    )


if __name__ == "__main__":
    main()
