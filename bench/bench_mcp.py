"""MCP server benchmark over real stdio connections on the generated 10k-note vault.

Measures, for ``kms mcp``:
- start-up: process start to an answered ``tools/list``, driven by the SDK's own client;
- ``kms_search`` and ``kms_append`` round trips (p50/p95; the append includes fsync, index update and
  the provenance record; with an ``idempotencyKey`` too, which adds the write's flushed journal), driven
  by a lean JSON-lines client (``LeanClient``: write one request line,
  read one response line), so the figures are what the server costs. The same calls through the
  SDK's Python client are shown too: that client validates every result against the tool's output
  schema and adds a few milliseconds of its own per call (Claude Code, a Node client, does not pay them);
- a full ``kms_inventory`` walk and the server's RSS;
- the orientation tools (issue 14): ``kms_start`` and ``kms_list_folder`` round trips (p50/p95);
- the session-state check every write makes (paused, revoked), and, with ``write.approval = always``, the
  time from the person's approval to the agent's call returning.

Every tier is on (read, write, edit, organize), so the start-up figure lists every tool; for the start-up
the semantic tier is on too, with the model when it has been fetched (``.cache/models``).

Baselines, measured in the same run: the SDK's minimal MCPServer (start-up, an echo round trip, RSS),
the raw FTS5 query for the same search words on a raw FTS5 index of the same vault (in-process: the
floor any BM25 search pays before a single byte crosses a pipe), and a raw append+fsync of the same bytes.
Usage: python bench/bench_mcp.py [--notes N] [--calls N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import anyio
from bench_core import baseline_index
from common import HERE, fresh_db, percentiles, rss_mb, table, timed, vault

FOLDERS = ["", "projects", "areas", "areas/work", "journal/2026", "archive/old-notes", "inbox"]
QUERIES = [
    "auth error handling",
    "release checklist",
    "python logging",
    "thread",
    "database migration",
    "socket timeout",
    "json",
    "decimal context",
    "budget",
    "hiring loop",
]


class LeanClient:
    """The least an MCP client does over stdio: the handshake, then one line out, one line in."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.next_id = 0
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(reply["error"])
                return reply["result"]

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        assert not result.get("isError"), result
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def lean_round_trips(cmd: list[str], env: dict[str, str], tool: str, args_for, calls: int) -> tuple[list[float], float]:
    client = LeanClient(cmd, env)
    try:
        client.call(tool, args_for(0))  # warm: the first call pays for lazy imports
        samples = [timed(lambda i=i: client.call(tool, args_for(i))) for i in range(calls)]
        return samples, rss_mb(client.proc.pid)
    finally:
        client.close()


async def sdk_session(params, fn):
    from mcp.client import Client

    started = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        startup = time.perf_counter() - started
        return startup, await fn(client)


async def sdk_round_trips(client, tool: str, args_for, calls: int) -> list[float]:
    samples = []
    for i in range(calls):
        t = time.perf_counter()
        r = await client.call_tool(tool, args_for(i))
        assert not r.is_error, r.structured_content
        samples.append(time.perf_counter() - t)
    return samples


async def inventory_walk(client) -> tuple[float, int]:
    t = time.perf_counter()
    cursor, notes, limit = None, 0, 500
    while True:
        r = await client.call_tool("kms_inventory", {"limit": limit, **({"cursor": cursor} if cursor else {})})
        if r.structured_content.get("truncated"):  # over the 100 KB cap: same cursor, smaller page
            limit //= 2
            continue
        notes += len(r.structured_content["notes"])
        cursor = r.structured_content["nextCursor"]
        if not cursor:
            return time.perf_counter() - t, notes


def state_checks(db: Path, calls: int = 5000) -> tuple[list[float], list[float]]:
    """The per-call session-state check every write makes (``control.refusal``: one indexed lookup) on the
    bench database, against a bare ``SELECT 1`` on the same connection (the floor of any query)."""
    from server.activity import control
    from server.store.db import connect

    try:
        from server.activity.session_registry import touch_session
    except ImportError:  # the code of a same-script comparison from before the module's name (issue 43)
        from server.activity.sessions import touch_session  # type: ignore[import-not-found, no-redef]

    conn = connect(db)
    touch_session(conn, "bench")
    try:
        ours = [timed(lambda: control.refusal(conn, "bench")) for _ in range(calls)]
        floor = [timed(lambda: conn.execute("SELECT 1").fetchall()) for _ in range(calls)]
    finally:
        conn.close()
    return ours, floor


def approval_round_trips(cmd: list[str], env: dict[str, str], db: Path, note_id: str, calls: int) -> list[float]:
    """``write.approval = always``: from the person's ``approve`` commit to the agent's call returning."""
    import threading

    from server.activity import approvals
    from server.store.db import connect

    client = LeanClient(cmd, {**env, "KMS_WRITE_APPROVAL": "always"})
    conn = connect(db)
    out: list[float] = []
    try:
        for i in range(calls):
            done = threading.Thread(
                target=client.call, args=("kms_append", {"noteId": note_id, "content": f"- approved {i}"})
            )
            done.start()
            while not (items := approvals.list_pending(conn)):
                time.sleep(0.001)
            start = time.perf_counter()
            approvals.decide(conn, items[0].id, approve=True)
            done.join()
            out.append(time.perf_counter() - start)
    finally:
        client.close()
        conn.close()
    return out


def run(args) -> None:
    root = vault(args.notes)
    db = fresh_db("mcp.db")
    from server.index.indexer import index_vault
    from server.index.search import build_match
    from server.store.db import connect
    from server.vault.registry import add_vault

    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "bench"))
    note_id, rel = cast(
        tuple[str, str],
        conn.execute("SELECT id, path FROM notes WHERE folder = 'inbox' ORDER BY id LIMIT 1").fetchall()[0],
    )
    conn.close()
    raw_fts = baseline_index(str(root), str(fresh_db("mcp-baseline.db")))
    raw_sql = "SELECT rowid, snippet(f, 1, '**', '**', '…', 32) FROM f WHERE f MATCH ? ORDER BY rank LIMIT 10"
    from kmscli.compose import kms_command

    try:
        from server.config.session_contract import SessionConfig
    except ImportError:  # the code of a same-script comparison from before the module's name (issue 43)
        from server.config.session import SessionConfig  # type: ignore[import-not-found, no-redef]

    session = SessionConfig(
        db_path=db,
        config_path=HERE / "out" / "bench-config.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=True,
        edit_enabled=True,
        organize_enabled=True,
        session_id="bench",
        per_minute=10_000,
        per_session=1_000_000,
        embed_enabled=False,
        project="/bench/project",
    )  # the highest limits the schema allows
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KMS_")}, **session.to_env()}
    command, kms_args = kms_command()  # not `args`: that is the bench's own options
    kms_cmd = [command, *kms_args]
    base_cmd = [sys.executable, str(HERE / "minimal_server.py")]

    def search_args(i: int) -> dict[str, Any]:
        return {"query": QUERIES[i % len(QUERIES)]}

    def search_args_as_topic(i: int) -> dict[str, Any]:  # kms_recall at its default budget (keyword-only here)
        return {"topic": QUERIES[i % len(QUERIES)]}

    def folder_args(i: int) -> dict[str, Any]:
        return {"path": FOLDERS[i % len(FOLDERS)]}

    def append_args(i: int) -> dict[str, Any]:
        return {"noteId": note_id, "content": f"- bench line {i}"}

    run_id = time.time_ns()

    def keyed_append_args(i: int) -> dict[str, Any]:  # a retry-safe append: journaled (``server.writes.once``)
        return {**append_args(i), "idempotencyKey": f"bench-{run_id}-{i}"}

    path = Path(root) / rel
    original = path.read_bytes()  # the cached vault must not grow run after run: restored below
    try:
        from mcp.client.stdio import StdioServerParameters

        kms = StdioServerParameters(command=kms_cmd[0], args=kms_cmd[1:], env=env)
        base = StdioServerParameters(command=base_cmd[0], args=base_cmd[1:], env=env)
        # start-up with the semantic tier on too: the model (when fetched) loads in the background
        model = HERE.parent / ".cache" / "models" / "all-MiniLM-L6-v2"
        semantic = {"KMS_EMBED_ENABLED": "1", "KMS_EMBED_MODEL_DIR": str(model)} if model.is_dir() else {}
        kms_all = StdioServerParameters(command=kms_cmd[0], args=kms_cmd[1:], env={**env, **semantic})
        r: dict[str, Any] = {"kms_start": [], "base_start": [], "semantic_on": bool(semantic)}
        for _ in range(args.starts):
            r["kms_start"].append(anyio.run(sdk_session, kms_all, lambda c: c.list_tools())[0])
            r["base_start"].append(anyio.run(sdk_session, base, lambda c: c.list_tools())[0])
        matches = [build_match(q)[0] for q in QUERIES] * 5
        r["raw_fts"] = [timed(lambda m=m: raw_fts.execute(raw_sql, (m,)).fetchall()) for m in matches]
        r["search"], r["kms_rss"] = lean_round_trips(kms_cmd, env, "kms_search", search_args, args.calls)
        r["append"], _ = lean_round_trips(kms_cmd, env, "kms_append", append_args, args.calls)
        r["append_keyed"], _ = lean_round_trips(kms_cmd, env, "kms_append", keyed_append_args, args.calls)
        r["recall"], _ = lean_round_trips(kms_cmd, env, "kms_recall", search_args_as_topic, args.calls)
        r["start"], _ = lean_round_trips(kms_cmd, env, "kms_start", lambda i: {}, args.calls)
        r["folder"], _ = lean_round_trips(kms_cmd, env, "kms_list_folder", folder_args, args.calls)
        r["echo"], r["base_rss"] = lean_round_trips(base_cmd, env, "echo", search_args, args.calls)
        r["state_check"], r["select_1"] = state_checks(db)
        r["approved"] = approval_round_trips(kms_cmd, env, db, note_id, max(5, args.calls // 20))

        async def sdk_kms(client):
            return (
                await sdk_round_trips(client, "kms_search", search_args, args.calls),
                await sdk_round_trips(client, "kms_append", append_args, args.calls),
                await inventory_walk(client),
            )

        async def sdk_base(client):
            return await sdk_round_trips(client, "echo", search_args, args.calls)

        _s, (r["sdk_search"], r["sdk_append"], (walk, notes)) = anyio.run(sdk_session, kms, sdk_kms)
        _s, r["sdk_echo"] = anyio.run(sdk_session, base, sdk_base)
        with open(path, "a", encoding="utf-8") as fh:
            for i in range(args.calls):
                t = time.perf_counter()
                fh.write(f"\n- raw line {i}\n")
                fh.flush()
                os.fsync(fh.fileno())
                r.setdefault("raw_fsync", []).append(time.perf_counter() - t)
    finally:
        path.write_bytes(original)
    report(args, r, walk, notes)


def report(args, r: dict[str, Any], walk: float, notes: int) -> None:
    p = {k: percentiles(v) for k, v in r.items() if isinstance(v, list) and k not in ("kms_start", "base_start")}
    ks, bs = statistics.median(r["kms_start"]), statistics.median(r["base_start"])
    pairs = sorted(k / b for k, b in zip(r["kms_start"], r["base_start"], strict=True))
    ms = 1000

    def row(name: str, ours: str, base: str, pct: int, target: str, limit: float | None = None):
        o, b = p[ours][pct] * ms, p[base][pct] * ms
        verdict = f"<= {limit:g} ms: {'PASS' if o <= limit else 'FAIL'}" if limit else target

        def fmt(v: float) -> str:
            return f"{v:.1f}" if v >= 1 else f"{v:.3f}"

        return (name, fmt(o), f"{fmt(b)} ({base})", f"{o / b:.2f}x", verdict)

    tiers = "every tier" + (" and the semantic model" if r["semantic_on"] else " (no model: semantic off)")
    table(
        f"MCP over stdio: {notes} notes, {args.calls} calls each, start-up median of {args.starts} "
        f"alternating starts, {tiers}",
        [
            (
                "start -> tools/list (s)",
                f"{ks:.2f}",
                f"{bs:.2f} (SDK minimal)",
                f"{ks / bs:.2f}x",
                f"<= 1.2x: {'PASS' if ks <= 1.2 * bs else 'FAIL'}",
            ),
            ("  start ratio per pair, min-max", "", "", f"{pairs[0]:.2f}-{pairs[-1]:.2f}x", ""),
            row("kms_search p50 (ms)", "search", "raw_fts", 0, "", 5),
            row("kms_search p95 (ms)", "search", "raw_fts", 1, "", 15),
            row("  same, lean echo (ms)", "search", "echo", 0, "SDK minimal server"),
            row("kms_append p50 (ms)", "append", "raw_fsync", 0, "", 10),
            row("kms_append p95 (ms)", "append", "raw_fsync", 1, ""),
            row("kms_append with idempotencyKey p50 (ms)", "append_keyed", "append", 0, "vs. without a key"),
            row("kms_append with idempotencyKey p95 (ms)", "append_keyed", "append", 1, ""),
            row("kms_recall p50 (ms)", "recall", "raw_fts", 0, "4,000-token bundle, keyword-only (no model here)"),
            row("kms_recall p95 (ms)", "recall", "raw_fts", 1, "", 150),
            row("session-state check per write (ms)", "state_check", "select_1", 0, "", 0.2),
            row("approve -> call returns p50 (ms)", "approved", "append", 0, "", 500),
            row("approve -> call returns p95 (ms)", "approved", "append", 1, "", 500),
            row("SDK client: kms_search p50", "sdk_search", "sdk_echo", 0, "for reference"),
            row("SDK client: kms_append p50", "sdk_append", "sdk_echo", 0, "for reference"),
            row("kms_start p50 (ms)", "start", "echo", 0, "echo: SDK minimal server"),
            row("kms_start p95 (ms)", "start", "echo", 1, "", 50),
            row("kms_list_folder p50 (ms)", "folder", "echo", 0, "echo: SDK minimal server"),
            row("kms_list_folder p95 (ms)", "folder", "echo", 1, "", 10),
            ("kms_inventory full walk (s)", f"{walk:.2f}", "", "", f"{notes} notes"),
            (
                "server RSS (MB)",
                f"{r['kms_rss']:.0f}",
                f"{r['base_rss']:.0f} (SDK minimal)",
                f"{r['kms_rss'] / r['base_rss']:.2f}x",
                "",
            ),
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--starts", type=int, default=11, help="start-up measurements of each server, alternating")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
