"""Start-up benchmark: process start to an answered ``tools/list`` over a real stdio connection.

Runs (each the median of --runs fresh processes, spoken to by the real SDK client):
  * kms with a valid handshake cache (server/fastpath.py answers before the SDK is imported);
  * kms without a cache (deleted before every run: the first start after an install or upgrade);
  * kms with the fast path switched off (KMS_MCP_FASTPATH=0, the SDK does everything);
  * the SDK's minimal MCPServer (bench/minimal_server.py), the baseline.
The client speaks the ``initialize`` handshake (mode='legacy'), as agent hosts such as Claude Code do;
one extra row shows the SDK client's default 'auto' mode, which opens with a ``server/discover`` probe
that the fast path leaves to the SDK.
Usage: python bench/bench_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio
from common import HERE, OUT, table

TARGET_S = 1.0


async def start_to_list(params, mode: str) -> float:
    from mcp.client import Client

    started = time.perf_counter()
    async with Client(params, mode=mode, read_timeout_seconds=60) as client:
        tools = (await client.list_tools()).tools
        elapsed = time.perf_counter() - started
    assert tools
    return elapsed


def median_of(runs: int, params, mode: str = "legacy", before=None) -> float:
    samples = []
    for _ in range(runs):
        if before:
            before()
        samples.append(anyio.run(start_to_list, params, mode))
    return statistics.median(samples)


def setup() -> tuple[dict[str, str], Path]:
    from server.db import connect
    from server.indexer import index_vault
    from server.vaults import add_vault

    folder = OUT / "startup"
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "kms.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    conn = connect(db)
    index_vault(conn, add_vault(conn, HERE.parent / "server" / "sample_vault", "sample"))
    conn.close()
    env = {**os.environ, "KMS_DB_PATH": str(db), "KMS_CONFIG": str(folder / "config.toml"), "KMS_ENABLED": "1",
           "KMS_AGENT_TOOLS_ENABLED": "1", "KMS_AGENT_WRITE_TOOLS_ENABLED": "1", "KMS_EMBED_ENABLED": "0"}
    env.pop("KMS_MCP_FASTPATH", None)
    return env, folder / "mcp-handshake-cache.json"


def main() -> None:
    from mcp.client.stdio import StdioServerParameters

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env, cache = setup()

    def kms(**extra: str) -> StdioServerParameters:
        return StdioServerParameters(command=sys.executable, args=["-m", "kmscli", "mcp"], env={**env, **extra})

    base = StdioServerParameters(command=sys.executable, args=[str(HERE / "minimal_server.py")], env=env)

    def drop_cache() -> None:
        cache.unlink(missing_ok=True)

    baseline = median_of(args.runs, base)
    baseline_auto = median_of(args.runs, base, mode="auto")
    no_cache = median_of(args.runs, kms(), before=drop_cache)
    anyio.run(start_to_list, kms(), "legacy")  # writes the cache
    assert cache.exists(), "the server wrote no handshake cache"
    cached = median_of(args.runs, kms())
    cached_auto = median_of(args.runs, kms(), mode="auto")
    off = median_of(args.runs, kms(KMS_MCP_FASTPATH="0"))

    def row(metric: str, ours: float, base_s: float) -> tuple[str, str, str, str, str]:
        verdict = "PASS" if ours <= TARGET_S else "FAIL"
        return (metric, f"{ours * 1000:.0f} ms", f"{base_s * 1000:.0f} ms", f"{ours / base_s:.2f}x",
                f"<= {TARGET_S * 1000:.0f} ms: {verdict}")

    table(f"MCP start-up, process start to tools/list answered (median of {args.runs}; baseline: SDK minimal server)",
          [row("kms, handshake cache", cached, baseline),
           row("kms, no cache (first start)", no_cache, baseline),
           row("kms, fast path off", off, baseline),
           row("kms, cache, client mode=auto", cached_auto, baseline_auto)])


if __name__ == "__main__":
    main()
