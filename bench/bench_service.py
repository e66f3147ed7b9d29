"""The kms service against one ``kms mcp`` per session (issue 25), every figure of a real server process.

On the generated vault (embedded first with ``--embed``), with the semantic model on:

- memory: the PSS of one idle ``kms mcp`` session, of N of them at once (today: every session loads its own
  model and vectors), and of one ``kms serve`` holding N token sessions that have each listed their tools and
  made one hybrid search (target: N sessions on the service <= 1.3x one stdio session);
- connect -> ``tools/list`` through the SDK's HTTP client (target p95 <= 50 ms), against the same through
  stdio (a process start each);
- ``kms_search`` and ``kms_append`` p50 over HTTP against stdio (target: HTTP <= stdio + 1 ms), with lean
  clients both ways (one request, one answer) taking turns in blocks of ten calls against a service and a
  ``kms mcp`` running side by side, so that the machine's load drifts over both alike; and with the SDK's
  client both ways, one after the other.

Usage: python bench/bench_service.py [--notes N] [--sessions N] [--calls N]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, cast

import anyio
from bench_mcp import QUERIES  # the same words as the stdio benchmark
from common import HERE, fresh_db, percentiles, table, vault


def pss_mb(pid: int) -> float:
    import psutil

    proc = psutil.Process(pid)
    return sum(p.memory_full_info().pss for p in [proc, *proc.children(recursive=True)]) / 2**20


def kms_command_now() -> tuple[str, list[str]]:
    from kmscli.compose import kms_command

    return kms_command()


def apsw_copy(src: Path, dest: Path) -> None:
    """A consistent copy of a database (its WAL folded in)."""
    import apsw

    source = apsw.Connection(str(src))
    target = apsw.Connection(str(dest))
    with target.backup("main", source, "main") as b:
        b.step()
    target.close()
    source.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def stdio_session(
    env: dict[str, str], pids: list[int], hold: anyio.Event, ready: list[int], by_meaning: bool = True
) -> None:
    """One ``kms mcp`` over stdio that lists its tools, searches once (by meaning unless told not to), then
    idles until ``hold``."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    from kmscli.compose import kms_command

    command, args = kms_command()
    async with Client(StdioServerParameters(command=command, args=args, env=env)) as client:
        await client.list_tools()
        if by_meaning:
            await client.call_tool("kms_semantic_search", {"query": "auth error handling"})
        else:
            await client.call_tool("kms_search", {"query": "auth error handling"})
        import psutil

        me = psutil.Process()
        pids += [c.pid for c in me.children() if c.pid not in pids]
        ready.append(1)
        await hold.wait()


async def http_client(url: str, secret: str) -> Any:
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
    return http, Client(streamable_http_client(url, http_client=http))


class LeanHttp:
    """The least an HTTP client does (2026-07-28: one POST a call on a kept-alive connection, JSON back): what
    the service costs. The standard library's client, as the stdio side is a bare pipe: a richer client
    library's own per-request work (httpx's, for one) is the client's cost, not the service's."""

    META = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def __init__(self, url: str, secret: str) -> None:
        import http.client
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.path, self.secret, self.next_id = parts.path, secret, 0
        self.http = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)

    def call(self, tool: str, arguments: dict[str, Any]) -> None:
        import json

        self.next_id += 1
        headers = {
            "Authorization": f"Bearer {self.secret}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        }
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": self.META},
        }
        self.http.request("POST", self.path, body=json.dumps(body), headers=headers)
        reply = self.http.getresponse()
        data = reply.read()
        assert reply.status == 200 and b'isError":true' not in data, data[:300]

    def close(self) -> None:
        self.http.close()


def cpu_s(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def alternating(
    clients: dict[str, Any], pids: dict[str, int], tool: str, args_for: Any, calls: int, block: int = 10
) -> dict[str, list[float]]:
    """Round trips of each client in turn, ``block`` calls at a time, so that a shared machine's load drifts
    over all of them alike; the first call of each is not counted (lazy imports). Also each server process's
    CPU time over its blocks (``<name>_cpu``, one figure a call): what a busy machine cannot inflate much."""
    out: dict[str, list[float]] = {name: [] for name in clients}
    cpu = dict.fromkeys(clients, 0.0)
    for c in clients.values():
        c.call(tool, args_for(0))
    for start in range(0, calls, block):
        for name, c in clients.items():
            before = cpu_s(pids[name])
            for i in range(start, min(calls, start + block)):
                t = time.perf_counter()
                c.call(tool, args_for(i))
                out[name].append(time.perf_counter() - t)
            cpu[name] += cpu_s(pids[name]) - before
    for name in clients:
        out[f"{name}_cpu"] = [cpu[name] / max(1, len(out[name]))]
    return out


async def round_trips(client: Any, tool: str, args_for: Any, calls: int) -> list[float]:
    out = []
    await client.call_tool(tool, args_for(0))
    for i in range(calls):
        t = time.perf_counter()
        r = await client.call_tool(tool, args_for(i))
        out.append(time.perf_counter() - t)
        assert not r.is_error, r.structured_content
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=2_000)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--embed", action="store_true", help="embed the vault first (kms embed): slow on a busy machine")
    args = ap.parse_args()
    from server.activity import tokens
    from server.config.scopes import Scopes
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    model = HERE.parent / ".cache" / "models" / "all-MiniLM-L6-v2"
    assert model.is_dir(), "run scripts/fetch_model.py first"
    root = vault(args.notes)
    config = HERE / "out" / "service-config.toml"
    config.write_text("[agent]\nwrite = true\n")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("KMS_")},
        "KMS_CONFIG": str(config),
        "KMS_EMBED_MODEL_DIR": str(model),
        "KMS_EMBED_ENABLED": "1",
        "KMS_WRITE_PER_MINUTE": "10000",
        "KMS_WRITE_PER_SESSION": "1000000",
    }
    # the vault indexed and embedded once (embedding is the slow part), copied for every run
    cached = HERE / "out" / f"service-{args.notes}-{'embedded' if args.embed else 'plain'}.db"
    embed_s = 0.0
    if not cached.exists():
        building = fresh_db(cached.name + ".building")
        conn = connect(building)
        index_vault(conn, add_vault(conn, root, "bench"))
        conn.close()
        t = time.perf_counter()
        if args.embed:
            subprocess.run(
                [sys.executable, "-m", "kmscli", "embed"],
                env={**env, "KMS_DB_PATH": str(building)},
                check=True,
                capture_output=True,
            )
        embed_s = time.perf_counter() - t
        apsw_copy(building, cached)
    db = fresh_db("service.db")
    apsw_copy(cached, db)
    env["KMS_DB_PATH"] = str(db)
    conn = connect(db)
    note_id = conn.execute("SELECT id FROM notes WHERE folder = 'inbox' ORDER BY id LIMIT 1").fetchall()[0][0]
    path = root / cast(str, conn.execute("SELECT path FROM notes WHERE id = ?", (note_id,)).fetchall()[0][0])
    original = path.read_bytes()
    load = os.getloadavg()[0]
    r: dict[str, Any] = {}

    async def stdio_memory(n: int, by_meaning: bool = True) -> float:
        pids: list[int] = []
        hold = anyio.Event()
        ready: list[int] = []
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(stdio_session, env, pids, hold, ready, by_meaning)
            while len(ready) < n:
                await anyio.sleep(0.05)
            await anyio.sleep(1.0)  # the background embedders settle
            total = sum(pss_mb(p) for p in pids)
            hold.set()
        return total

    r["stdio_one"] = anyio.run(stdio_memory, 1)
    r["stdio_lexical"] = anyio.run(stdio_memory, 1, False)
    r["stdio_n"] = anyio.run(stdio_memory, args.sessions)

    from bench_mcp import LeanClient

    command, cargs = kms_command_now()
    lean = LeanClient([command, *cargs], env)  # a stdio session beside the service: the lean pair alternates
    lean.call("kms_semantic_search", {"query": "auth error handling"})  # the model on, as in the service
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    secrets = [
        tokens.create(conn, label=f"bench {i}", scopes=Scopes.parse("tier:write"))[1] for i in range(args.sessions)
    ]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                import urllib.request

                urllib.request.urlopen(url.removesuffix("/mcp") + "/health", timeout=0.5)
                break
            except OSError:
                time.sleep(0.1)

        async def service_side() -> None:

            async with AsyncExitStack() as stack:
                clients = []
                for secret in secrets:
                    http, client = await http_client(url, secret)
                    await stack.enter_async_context(http)
                    c = await stack.enter_async_context(client)
                    await c.list_tools()
                    await c.call_tool("kms_semantic_search", {"query": "auth error handling"})
                    clients.append(c)
                await anyio.sleep(1.0)
                r["service_n"] = pss_mb(proc.pid)
                r["http_search"] = await round_trips(
                    clients[0], "kms_search", lambda i: {"query": QUERIES[i % len(QUERIES)]}, args.calls
                )
                r["http_append"] = await round_trips(
                    clients[1], "kms_append", lambda i: {"noteId": note_id, "content": f"- h {i}"}, args.calls
                )

                def lean_pair() -> None:
                    http = LeanHttp(url, secrets[2])
                    try:
                        both = {"http": http, "stdio": lean}
                        pids = {"http": proc.pid, "stdio": lean.proc.pid}
                        found = alternating(
                            both, pids, "kms_search", lambda i: {"query": QUERIES[i % len(QUERIES)]}, args.calls
                        )
                        r["lean_http_search"], r["lean_stdio_search"] = found["http"], found["stdio"]
                        r["cpu_search"] = (found["http_cpu"][0], found["stdio_cpu"][0])
                        added = alternating(
                            both, pids, "kms_append", lambda i: {"noteId": note_id, "content": f"- l {i}"}, args.calls
                        )
                        r["lean_http_append"], r["lean_stdio_append"] = added["http"], added["stdio"]
                        r["cpu_append"] = (added["http_cpu"][0], added["stdio_cpu"][0])
                    finally:
                        http.close()

                await anyio.to_thread.run_sync(lean_pair)
            # a host makes its HTTP client (connection pool, TLS context) once and connects sessions through it;
            # the first series also builds a new client each time, as the SDK does when given none
            from mcp.client import Client
            from mcp.client.streamable_http import streamable_http_client

            connects: list[float] = []
            pooled: list[float] = []
            async with AsyncExitStack() as stack:
                pools = [await stack.enter_async_context((await http_client(url, s))[0]) for s in secrets]
                for i in range(args.calls // 2):
                    t0 = time.perf_counter()
                    http, client = await http_client(url, secrets[i % len(secrets)])
                    async with http, client as c:
                        await c.list_tools()
                    connects.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    async with Client(streamable_http_client(url, http_client=pools[i % len(pools)])) as c:
                        await c.list_tools()
                    pooled.append(time.perf_counter() - t0)
            r["http_connect"], r["http_connect_pooled"] = connects, pooled

        anyio.run(service_side)
    finally:
        lean.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)

    async def stdio_side() -> None:
        from mcp.client import Client
        from mcp.client.stdio import StdioServerParameters

        from kmscli.compose import kms_command

        command, cargs = kms_command()
        async with Client(StdioServerParameters(command=command, args=cargs, env=env)) as c:
            # the model on here too: the service's sessions run with it (and its background embedder) loaded
            await c.call_tool("kms_semantic_search", {"query": "auth error handling"})
            r["stdio_search"] = await round_trips(
                c, "kms_search", lambda i: {"query": QUERIES[i % len(QUERIES)]}, args.calls
            )
            r["stdio_append"] = await round_trips(
                c, "kms_append", lambda i: {"noteId": note_id, "content": f"- s {i}"}, args.calls
            )
        starts = []
        for _ in range(5):
            t0 = time.perf_counter()
            async with Client(StdioServerParameters(command=command, args=cargs, env=env)) as c:
                await c.list_tools()
            starts.append(time.perf_counter() - t0)
        r["stdio_connect"] = starts

    try:
        anyio.run(stdio_side)
    finally:
        path.write_bytes(original)
    ms = 1000
    lhs, lss = percentiles(r["lean_http_search"]), percentiles(r["lean_stdio_search"])
    lha, lsa = percentiles(r["lean_http_append"]), percentiles(r["lean_stdio_append"])
    hs, ss = percentiles(r["http_search"]), percentiles(r["stdio_search"])
    ha, sa = percentiles(r["http_append"]), percentiles(r["stdio_append"])
    hc, sc = percentiles(r["http_connect"]), percentiles(r["stdio_connect"])
    hp = percentiles(r["http_connect_pooled"])
    n = args.sessions
    embedded = (
        "embedded" + (f" ({embed_s:.0f} s)" if embed_s else "")
        if args.embed
        else "not embedded (the model loads all the same)"
    )
    table(
        f"kms service vs kms mcp: {args.notes} notes {embedded}, model on, {n} sessions, "
        f"{args.calls} calls; load average {load:.1f} at the start",
        [
            ("PSS, 1 stdio session (MiB)", f"{r['stdio_one']:.0f}", "", "", "idle, after one hybrid search"),
            (
                "PSS, 1 stdio session never searching by meaning (MiB)",
                f"{r['stdio_lexical']:.0f}",
                "",
                "",
                f"idle, model on but unused: <= 120 MiB: {'PASS' if r['stdio_lexical'] <= 120 else 'FAIL'}",
            ),
            (
                f"PSS, {n} stdio sessions (MiB)",
                f"{r['stdio_n']:.0f}",
                f"{r['stdio_one']:.0f} (1 session)",
                f"{r['stdio_n'] / r['stdio_one']:.2f}x",
                "today",
            ),
            (
                f"PSS, service with {n} sessions (MiB)",
                f"{r['service_n']:.0f}",
                f"{r['stdio_one']:.0f} (1 session)",
                f"{r['service_n'] / r['stdio_one']:.2f}x",
                f"<= 1.3x: {'PASS' if r['service_n'] <= 1.3 * r['stdio_one'] else 'FAIL'}",
            ),
            (
                "connect -> tools/list p95 (ms), the host's HTTP client",
                f"{hp[1] * ms:.1f} HTTP",
                f"{sc[1] * ms:.0f} stdio (a start)",
                f"{hp[1] / sc[1]:.3f}x",
                f"<= 50 ms: {'PASS' if hp[1] * ms <= 50 else 'FAIL'}",
            ),
            (
                "connect -> tools/list p95 (ms), a new HTTP client each",
                f"{hc[1] * ms:.1f} HTTP",
                f"{sc[1] * ms:.0f} stdio (a start)",
                f"{hc[1] / sc[1]:.3f}x",
                "for reference: + the client's own pool and TLS context",
            ),
            (
                "kms_search p50, lean clients (ms)",
                f"{lhs[0] * ms:.2f} HTTP",
                f"{lss[0] * ms:.2f} stdio",
                f"{lhs[0] / lss[0]:.2f}x",
                f"<= stdio + 1 ms: {'PASS' if lhs[0] <= lss[0] + 0.001 else 'FAIL'}",
            ),
            (
                "kms_append p50, lean clients (ms)",
                f"{lha[0] * ms:.2f} HTTP",
                f"{lsa[0] * ms:.2f} stdio",
                f"{lha[0] / lsa[0]:.2f}x",
                f"<= stdio + 1 ms: {'PASS' if lha[0] <= lsa[0] + 0.001 else 'FAIL'}",
            ),
            *(
                (
                    f"{tool}: server CPU a call (ms)",
                    f"{r[key][0] * ms:.2f} HTTP",
                    f"{r[key][1] * ms:.2f} stdio",
                    f"{r[key][0] / r[key][1]:.2f}x",
                    f"+{(r[key][0] - r[key][1]) * ms:.2f} ms (for reference: what load cannot inflate)",
                )
                for tool, key in (("kms_search", "cpu_search"), ("kms_append", "cpu_append"))
            ),
            (
                "kms_search p50, SDK client (ms)",
                f"{hs[0] * ms:.2f} HTTP",
                f"{ss[0] * ms:.2f} stdio",
                f"{hs[0] / ss[0]:.2f}x",
                "for reference: the SDK's HTTP client costs more than its stdio one",
            ),
            (
                "kms_append p50, SDK client (ms)",
                f"{ha[0] * ms:.2f} HTTP",
                f"{sa[0] * ms:.2f} stdio",
                f"{ha[0] / sa[0]:.2f}x",
                "for reference",
            ),
        ],
    )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
