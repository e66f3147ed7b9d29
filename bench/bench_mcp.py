"""MCP server benchmark over a real stdio connection on the generated 10k-note vault.

Measures: process start to answered ``tools/list``; ``kms_search`` and ``kms_append`` round trips
(p50/p95, the append including fsync and index update); a full ``kms_inventory`` walk; server RSS.
Baselines, measured in the same run: the SDK's minimal MCPServer (start-up and an echo round trip),
and a raw append+fsync of the same bytes to a file.
Usage: python bench/bench_mcp.py [--notes N] [--calls N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import anyio
from common import HERE, fresh_db, percentiles, rss_mb, table, vault

QUERIES = ["auth error handling", "release checklist", "python logging", "thread", "database migration",
           "socket timeout", "json", "decimal context", "budget", "hiring loop"]


async def session(params, fn):
    from mcp.client import Client

    started = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        startup = time.perf_counter() - started
        return startup, await fn(client)


def server_pid() -> int | None:
    import psutil

    me = psutil.Process()
    kids = me.children(recursive=True)
    return kids[-1].pid if kids else None


async def main_async(args) -> None:
    from mcp.client.stdio import StdioServerParameters

    root = vault(args.notes)
    db = fresh_db("mcp.db")
    from server.db import connect
    from server.indexer import index_vault
    from server.vaults import add_vault

    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "bench"))
    target = conn.execute("SELECT id, path FROM notes WHERE folder = 'inbox' ORDER BY id LIMIT 1").fetchall()[0]
    conn.close()
    env = {**os.environ, "KMS_DB_PATH": str(db), "KMS_CONFIG": str(HERE / "out" / "bench-config.toml"),
           "KMS_ENABLED": "1", "KMS_AGENT_TOOLS_ENABLED": "1", "KMS_AGENT_WRITE_TOOLS_ENABLED": "1",
           "KMS_WRITE_PER_MINUTE": "100000", "KMS_WRITE_PER_SESSION": "1000000", "KMS_EMBED_ENABLED": "0"}
    kms = StdioServerParameters(command=sys.executable, args=["-m", "kmscli", "mcp"], env=env)
    base = StdioServerParameters(command=sys.executable, args=[str(HERE / "minimal_server.py")], env=env)

    async def kms_work(client):
        search, append = [], []
        for i in range(args.calls):
            t = time.perf_counter()
            await client.call_tool("kms_search", {"query": QUERIES[i % len(QUERIES)]})
            search.append(time.perf_counter() - t)
        for i in range(args.calls):
            t = time.perf_counter()
            r = await client.call_tool("kms_append", {"noteId": target[0], "content": f"- bench line {i}"})
            assert not r.is_error, r.structured_content
            append.append(time.perf_counter() - t)
        t = time.perf_counter()
        cursor, pages, notes, limit = None, 0, 0, 500
        while True:
            r = await client.call_tool("kms_inventory", {"limit": limit, **({"cursor": cursor} if cursor else {})})
            pages += 1
            if r.structured_content.get("truncated"):  # over the 100 KB cap: same cursor, smaller page
                limit //= 2
                continue
            notes += len(r.structured_content["notes"])
            cursor = r.structured_content["nextCursor"]
            if not cursor:
                break
        walk = time.perf_counter() - t
        return search, append, walk, notes, rss_mb(server_pid())

    async def base_work(client):
        echo = []
        for i in range(args.calls):
            t = time.perf_counter()
            await client.call_tool("echo", {"query": QUERIES[i % len(QUERIES)]})
            echo.append(time.perf_counter() - t)
        return echo, rss_mb(server_pid())

    kms_starts, base_starts = [], []
    for _ in range(3):
        s, _r = await session(kms, lambda c: c.list_tools())
        kms_starts.append(s)
        s, _r = await session(base, lambda c: c.list_tools())
        base_starts.append(s)
    _s, (search, append, walk, notes, kms_rss) = await session(kms, kms_work)
    _s, (echo, base_rss) = await session(base, base_work)

    raw = []
    path = Path(root) / target[1]
    with open(path, "a", encoding="utf-8") as fh:
        for i in range(args.calls):
            t = time.perf_counter()
            fh.write(f"\n- raw line {i}\n")
            fh.flush()
            os.fsync(fh.fileno())
            raw.append(time.perf_counter() - t)
    s50, s95 = percentiles(search)
    a50, a95 = percentiles(append)
    e50, e95 = percentiles(echo)
    r50, _ = percentiles(raw)
    ks, bs = sorted(kms_starts)[1], sorted(base_starts)[1]
    ms = 1000
    table(f"MCP over stdio: {notes} notes, {args.calls} calls each (median of 3 start-ups)", [
        ("start -> tools/list (s)", f"{ks:.2f}", f"{bs:.2f}", f"{ks / bs:.2f}x", "<= 1.0 s"),
        ("kms_search p50 (ms)", f"{s50 * ms:.1f}", f"{e50 * ms:.1f}", f"{s50 / e50:.2f}x", "<= 5 ms"),
        ("kms_search p95 (ms)", f"{s95 * ms:.1f}", f"{e95 * ms:.1f}", f"{s95 / e95:.2f}x", "<= 15 ms"),
        ("kms_append p50 (ms)", f"{a50 * ms:.1f}", f"{r50 * ms:.1f}", f"{a50 / r50:.1f}x", "<= 10 ms"),
        ("kms_append p95 (ms)", f"{a95 * ms:.1f}", "", "", ""),
        ("kms_inventory full walk (s)", f"{walk:.2f}", "", "", f"{notes} notes"),
        ("server RSS (MB)", f"{kms_rss:.0f}", f"{base_rss:.0f}", f"{kms_rss / base_rss:.2f}x", ""),
    ])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=200)
    anyio.run(main_async, ap.parse_args())


if __name__ == "__main__":
    main()
