"""``python -m kmscli mcp`` as an agent host runs it: a subprocess spoken to over stdio (issue 3)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import apsw
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from support.vaults import write

from server.mcp.tools import tool_names
from server.store.db import connect, rows

READ_TOOLS = set(tool_names("read"))


def server_env(db_path: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "KMS_DB_PATH": str(db_path),
        "KMS_CONFIG": str(tmp_path / "config.toml"),
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
        "PYTHONIOENCODING": "utf-8",
        **extra,
    }


@asynccontextmanager
async def stdio_server(db_path: Path, tmp_path: Path, **extra: str) -> AsyncIterator[Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kmscli", "mcp"],
        env=server_env(db_path, tmp_path, **extra),
        cwd=str(tmp_path),
    )
    async with Client(params, read_timeout_seconds=30) as client:
        yield client


async def search_ids(client: Any, query: str) -> list[str]:
    result = await client.call_tool("kms_search", {"query": query})
    assert not result.is_error, result.structured_content
    return [h["noteId"] for h in result.structured_content["hits"]]


async def wait_for_hit(client: Any, query: str, timeout: float) -> float:
    """Seconds until ``query`` finds a note (polling the real tool), or fail."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if await search_ids(client, query):
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"{query!r} not searchable within {timeout} s")


async def test_tools_list_and_search_round_trip(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    async with stdio_server(db_path, tmp_path) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == READ_TOOLS  # writes are off unless enabled
        assert tools["kms_search"].annotations.read_only_hint is True
        result = await client.call_tool("kms_search", {"query": "shakshuka", "limit": 3})
        assert not result.is_error
        hits = result.structured_content["hits"]
        assert hits[0]["title"] == "Shakshuka" and hits[0]["score"] > 0
        read = await client.call_tool("kms_read", {"noteId": hits[0]["noteId"]})
        assert "Eggs poached" in read.structured_content["body"]
        bad = await client.call_tool("kms_search", {"query": '"unbalanced'})
        assert bad.is_error and bad.structured_content["error"] == "invalid-input"


def test_unexpanded_variable_refuses_to_start(db_path: Path, tmp_path: Path) -> None:
    base = {**os.environ, **server_env(db_path, tmp_path)}
    runs = [([], {**base, "KMS_DB_PATH": "${KMS_HOME}/kms.db"}), (["--vault=${VAULT}"], base)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kmscli", "mcp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        for args, env in runs
    ]
    (env_out, env_err), (arg_out, arg_err) = (p.communicate("", timeout=60) for p in procs)
    assert procs[0].returncode != 0
    assert "unexpanded ${VAR}" in env_err and "KMS_DB_PATH='${KMS_HOME}/kms.db'" in env_err
    assert "Traceback" not in env_err and env_out == ""
    assert not (tmp_path / "${KMS_HOME}").exists()
    assert procs[1].returncode != 0 and "${VAULT}" in arg_err and "Traceback" not in arg_err and arg_out == ""


async def test_human_edit_is_visible_to_the_next_call(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    async with stdio_server(db_path, tmp_path) as client:
        # warm-up: the watcher thread starts with the server; wait until it sees a first change
        write(vault_dir / "inbox" / "warmup.md", "warmupword")
        await wait_for_hit(client, "warmupword", timeout=20)

        assert await search_ids(client, "freshlyaddedword") == []
        target = vault_dir / "reference" / "Shakshuka.md"
        target.write_text(target.read_text(encoding="utf-8") + "\nfreshlyaddedword\n", encoding="utf-8")
        elapsed = await wait_for_hit(client, "freshlyaddedword", timeout=10)
        assert elapsed < 3, f"edit took {elapsed:.2f} s to reach the index"  # ~1 s when the machine is idle

        # a new note, and a deleted one
        write(vault_dir / "inbox" / "Brand new.md", "brandnewword")
        await wait_for_hit(client, "brandnewword", timeout=5)
        (vault_dir / "inbox" / "warmup.md").unlink()
        started = time.monotonic()
        while await search_ids(client, "warmupword") and time.monotonic() - started < 5:
            await asyncio.sleep(0.05)
        assert await search_ids(client, "warmupword") == []
    assert "freshlyaddedword" in target.read_text(encoding="utf-8")


async def test_two_servers_on_one_db(indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path) -> None:
    nid = indexed.execute("SELECT id FROM notes WHERE title = 'Kubernetes'").fetchall()[0][0]
    async with (
        stdio_server(db_path, tmp_path, KMS_SESSION_ID="sA") as a,
        stdio_server(db_path, tmp_path, KMS_SESSION_ID="sB") as b,
    ):
        # concurrent calls on both servers
        calls = [c.call_tool("kms_read", {"noteId": nid}) for c in (a, b) for _ in range(3)]
        calls += [c.call_tool("kms_search", {"query": "kubernetes"}) for c in (a, b)]
        results = await asyncio.gather(*calls)
        assert all(not r.is_error for r in results), [r.structured_content for r in results if r.is_error]
        assert {r.structured_content["noteId"] for r in results[:6]} == {nid}
        # both watchers re-index the same new file at the same moment; both must keep working
        for i in range(3):
            write(vault_dir / "inbox" / f"shared {i}.md", f"sharedword{i}")
            for c in (a, b):
                await wait_for_hit(c, f"sharedword{i}", timeout=20)
        assert indexed.execute("SELECT count(*) FROM notes WHERE path LIKE 'inbox/shared %'").fetchall() == [(3,)]
    # each server flushed its reads under its own session when it stopped
    conn = connect(db_path)
    reads = rows(conn, "SELECT session_id, count FROM note_reads WHERE note_id = ? ORDER BY session_id", (nid,))
    assert reads == [{"session_id": "sA", "count": 3}, {"session_id": "sB", "count": 3}]  # a search is no read
    searched = rows(
        conn,
        "SELECT session_id, count(*) AS n FROM session_searches WHERE query = 'kubernetes' GROUP BY session_id"
        " ORDER BY session_id",
    )
    assert searched == [{"session_id": "sA", "n": 1}, {"session_id": "sB", "n": 1}]
    sessions = {r["id"]: r for r in rows(conn, "SELECT id, kind, ended_at FROM sessions")}
    assert {"sA", "sB"} <= set(sessions) and all(sessions[s]["kind"] == "server" for s in ("sA", "sB"))
    conn.close()
