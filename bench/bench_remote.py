"""Remote mode's cost (issue 39), on a real ``kms serve`` process over the generated vault:

- a ``kms_search`` through the remote listener with an OAuth access token against the same call through the
  local listener with a local token, lean clients taking turns in blocks of ten (target: remote <= local + 1 ms);
- the local call with remote mode off against the same with it on (target: off adds nothing; on, only the
  remote listener's own work, which the local path never runs).

Usage: python bench/bench_remote.py [--notes N] [--calls N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench_service import LeanHttp, alternating, apsw_copy, free_port
from common import HERE, fresh_db, percentiles, table, vault

QUERIES = ["lighthouse", "meeting notes", "project plan", "error handling", "weekly review"]


def serve(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):  # noqa: S310
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the service did not start")


def wait_remote(base: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/.well-known/oauth-authorization-server", timeout=1):  # noqa: S310
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the remote listener did not open")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=2_000)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    from server.activity import remote_grants, tokens
    from server.config.scopes import Scopes
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    root = vault(args.notes)
    cached = HERE / "out" / f"remote-{args.notes}.db"
    if not cached.exists():
        building = fresh_db(cached.name + ".building")
        conn = connect(building)
        index_vault(conn, add_vault(conn, root, "bench"))
        conn.close()
        apsw_copy(building, cached)
    db = fresh_db("remote.db")
    apsw_copy(cached, db)
    conn = connect(db)
    _token, local_secret = tokens.create(conn, label="bench local", scopes=Scopes.parse("tier:read"))
    port, remote_port = free_port(), free_port()
    base = f"http://127.0.0.1:{remote_port}"
    remote_grants.save_client(conn, "bench", {"client_id": "bench", "redirect_uris": ["http://127.0.0.1/cb"]})
    code = remote_grants.issue_code(
        conn,
        "bench",
        {
            "scopes": "tier:read",
            "client_name": "bench",
            "redirect_uri": "http://127.0.0.1/cb",
            "explicit": True,
            "code_challenge": "x",
            "resource": f"{base}/mcp",
        },
    )
    access = remote_grants.exchange_code(conn, code).access_token
    config: Path = HERE / "out" / "remote-config.toml"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("KMS_")},
        "KMS_CONFIG": str(config),
        "KMS_DB_PATH": str(db),
        "KMS_EMBED_ENABLED": "0",
    }

    def search(i: int) -> dict[str, Any]:
        return {"query": QUERIES[i % len(QUERIES)], "limit": 5}

    load = os.getloadavg()[0]
    config.write_text(f'[remote]\nenabled = true\nurl = "{base}"\nport = {remote_port}\n')
    proc = serve(env, port)
    try:
        wait_remote(base)
        clients = {
            "local": LeanHttp(f"http://127.0.0.1:{port}/mcp", local_secret),
            "remote": LeanHttp(f"{base}/mcp", access),
        }
        on = alternating(clients, {"local": proc.pid, "remote": proc.pid}, "kms_search", search, args.calls)
        for c in clients.values():
            c.close()
    finally:
        stop(proc)
    config.write_text("")
    proc = serve(env, port)
    try:
        lean = LeanHttp(f"http://127.0.0.1:{port}/mcp", local_secret)
        off = alternating({"local": lean}, {"local": proc.pid}, "kms_search", search, args.calls)
        lean.close()
    finally:
        stop(proc)
    local, remote, local_off = (percentiles(on["local"]), percentiles(on["remote"]), percentiles(off["local"]))
    ms = 1000
    table(
        f"remote mode, kms_search p50/p95 (ms), {args.notes} notes, {args.calls} calls, load {load:.1f}",
        [
            (
                "remote (OAuth) vs local token",
                f"{remote[0] * ms:.2f}/{remote[1] * ms:.2f}",
                f"{local[0] * ms:.2f}/{local[1] * ms:.2f}",
                f"{(remote[0] - local[0]) * ms:+.2f} ms",
                "<= +1 ms " + ("✓" if remote[0] - local[0] <= 0.001 else "✗"),
            ),
            (
                "local, remote mode off vs on",
                f"{local_off[0] * ms:.2f}/{local_off[1] * ms:.2f}",
                f"{local[0] * ms:.2f}/{local[1] * ms:.2f}",
                f"{(local_off[0] - local[0]) * ms:+.2f} ms",
                "nothing added",
            ),
        ],
    )


if __name__ == "__main__":
    main()
