"""Server CPU per tool call, this code against an older checkout, over HTTP (``kms serve``) and stdio (``kms mcp``).

Issue 37 asks that no tool call be slower than before it. Round trips on a shared 2-core machine move with the
load; the CPU a server process spends per call moves much less. For each transport, one server per checkout runs
on its own copy of the same vault, and lean clients (one request, one answer: ``LeanHttp``, ``LeanClient``) call
``kms_search``, ``kms_read`` and ``kms_append`` in alternating blocks of ``--block`` calls, the order swapped
every block; each block's CPU is read from the server process's own counters (psutil, 10 ms ticks: hence blocks
of 100). Reported per tool: the mean CPU per call of each checkout, their ratio, and the median of the per-block
ratios, with the load.

Usage: python bench/bench_call_cpu.py --old /path/to/old/checkout [--notes N] [--blocks N] [--block N]
(``--old``: a checkout with its own ``.venv``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_mcp import LeanClient
from bench_service import LeanHttp, cpu_s, free_port
from common import HERE, OUT, vault

TOOLS = ("kms_search", "kms_read", "kms_append")
SETUP = """
import json, os, sys
from server.activity import tokens
from server.config.scopes import Scopes
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import add_vault
conn = connect(os.environ["KMS_DB_PATH"])
index_vault(conn, add_vault(conn, sys.argv[1], "bench"))
ids = [r[0] for r in conn.execute("SELECT id FROM notes WHERE path LIKE 'inbox/%' ORDER BY path LIMIT 20")]
_t, read = tokens.create(conn, label="read", scopes=Scopes.parse("tier:read"))
_t, write = tokens.create(conn, label="write", scopes=Scopes.parse("tier:write"))
print(json.dumps({"ids": ids, "read": read, "write": write}))
"""


class Http(LeanHttp):
    """``LeanHttp`` that opens its connection again when the service closed an idle one (keep-alive 5 s: the
    other checkout's block may take longer)."""

    def call(self, tool: str, arguments: dict[str, Any]) -> None:
        try:
            super().call(tool, arguments)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.http.close()
            super().call(tool, arguments)


class Checkout:
    """One checkout's copy of the vault, its database and the environment its servers run in."""

    def __init__(self, name: str, root: Path, source: Path) -> None:
        self.name, self.root = name, root
        self.python = str(root / ".venv" / "bin" / "python") if (root / ".venv").is_dir() else sys.executable
        self.dir = OUT / f"call-cpu-{name}"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        shutil.copytree(source, self.dir / "vault")
        (self.dir / "config.toml").write_text("[agent]\nwrite = true\n")
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KMS_")},
            "KMS_DB_PATH": str(self.dir / "kms.db"),
            "KMS_CONFIG": str(self.dir / "config.toml"),
            "KMS_EMBED_ENABLED": "0",
            "KMS_WRITE_PER_MINUTE": "10000",
            "KMS_WRITE_PER_SESSION": "1000000",
            "PYTHONPATH": str(root),
        }
        made = subprocess.run(
            [self.python, "-c", SETUP, str(self.dir / "vault")],
            env=self.env,
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        self.info = json.loads(made.stdout)

    def arguments(self, tool: str) -> Callable[[int], dict[str, Any]]:
        ids = self.info["ids"]
        return {
            "kms_search": lambda i: {"query": "auth"},
            "kms_read": lambda i: {"noteId": ids[i % len(ids)]},
            "kms_append": lambda i: {"noteId": ids[i % len(ids)], "content": f"- line {i}"},
        }[tool]


def serve(checkout: Checkout) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [checkout.python, "-m", "kmscli", "serve", "--port", str(port)],
        env=checkout.env,
        cwd=checkout.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5)
            return proc, port
        except OSError:
            time.sleep(0.1)  # polling for the service to answer
    raise SystemExit(f"the {checkout.name} service did not start")


def blocks(clients: dict[str, tuple[Any, int, Callable[[int], dict[str, Any]]]], tool: str, n: int, size: int) -> dict:
    """Alternating blocks; the mean CPU per call of each, and the median of the per-block ratios."""
    per: dict[str, list[float]] = {name: [] for name in clients}
    for client, _pid, args in clients.values():
        for i in range(20):  # warm: the first calls load what a call needs
            client.call(tool, args(i))
    for b in range(n):
        order = list(clients.items()) if b % 2 == 0 else list(reversed(clients.items()))
        for name, (client, pid, args) in order:
            before = cpu_s(pid)
            for i in range(size):
                client.call(tool, args(b * size + i))
            per[name].append((cpu_s(pid) - before) / size * 1000)
    old, new = statistics.mean(per["old"]), statistics.mean(per["new"])
    block_ratios = [n_ / o for n_, o in zip(per["new"], per["old"], strict=True) if o]
    return {"old": old, "new": new, "ratio": new / old, "median ratio": statistics.median(block_ratios)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", type=Path, required=True, help="a checkout of the older code, with its .venv")
    ap.add_argument("--notes", type=int, default=2_000)
    ap.add_argument("--blocks", type=int, default=16, help="blocks of each checkout, alternating")
    ap.add_argument("--block", type=int, default=100, help="calls a block")
    args = ap.parse_args()
    source = vault(args.notes)
    checkouts = {"old": Checkout("old", args.old.resolve(), source), "new": Checkout("new", HERE.parent, source)}
    results: dict[str, dict[str, dict]] = {"http": {}, "stdio": {}}

    services = {name: serve(c) for name, c in checkouts.items()}
    try:
        for tool in TOOLS:
            token = "write" if tool == "kms_append" else "read"
            clients = {
                name: (
                    Http(f"http://127.0.0.1:{port}/mcp", checkouts[name].info[token]),
                    proc.pid,
                    checkouts[name].arguments(tool),
                )
                for name, (proc, port) in services.items()
            }
            results["http"][tool] = blocks(clients, tool, args.blocks, args.block)
            for client, _pid, _args in clients.values():
                client.close()
    finally:
        for proc, _port in services.values():
            proc.terminate()
            proc.wait(30)

    for tool in TOOLS:
        stdio: dict[str, LeanClient] = {}
        for name, c in checkouts.items():
            os.chdir(c.root)  # ``python -m kmscli`` imports the checkout it runs in
            stdio[name] = LeanClient([c.python, "-m", "kmscli", "mcp"], c.env)
        os.chdir(OUT)
        try:
            piped = {name: (lean, lean.proc.pid, checkouts[name].arguments(tool)) for name, lean in stdio.items()}
            results["stdio"][tool] = blocks(piped, tool, args.blocks, args.block)
        finally:
            for lean in stdio.values():
                lean.close()

    print(
        f"\nserver CPU per call, {args.old} (old) against this checkout (new): {args.notes} notes, "
        f"{args.blocks} blocks of {args.block} calls each, alternating; load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'':24}{'old (ms)':>10}{'new (ms)':>10}{'ratio':>8}{'median of blocks':>18}")
    for transport, by_tool in results.items():
        for tool, r in by_tool.items():
            name = f"{transport} {tool}"
            print(f"{name:24}{r['old']:>10.3f}{r['new']:>10.3f}{r['ratio']:>8.3f}{r['median ratio']:>18.3f}")


if __name__ == "__main__":
    main()
