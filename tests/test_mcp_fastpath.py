"""``kms mcp`` answers the handshake from a cache while the SDK imports, then hands the connection
to the SDK (server/fastpath.py). Real subprocesses, the real SDK stdio client, a real DB."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the fast path is POSIX-only")

WRITE_TOOLS = {"kms_create", "kms_append"}
ANSWERED = "answered initialize, tools/list from the handshake cache;"


def server_env(db_path: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "KMS_DB_PATH": str(db_path), "KMS_CONFIG": str(tmp_path / "config.toml"),
            "KMS_ENABLED": "1", "KMS_AGENT_TOOLS_ENABLED": "1", "KMS_EMBED_DOWNLOAD": "0",
            "KMS_LOG_LEVEL": "DEBUG", "PYTHONIOENCODING": "utf-8", **extra}


def cache_file(db_path: Path) -> Path:
    return db_path.parent / "mcp-handshake-cache.json"


@asynccontextmanager
async def sdk_client(db_path: Path, tmp_path: Path, log: Path, **extra: str) -> AsyncIterator[Any]:
    """The real SDK stdio client on ``python -m kmscli mcp``, the initialize handshake as agent hosts
    speak it (mode='legacy'); the server's stderr goes to ``log``."""
    params = StdioServerParameters(command="/bin/sh", args=["-c", 'exec "$0" -m kmscli mcp 2>"$1"',
                                                            sys.executable, str(log)],
                                   env=server_env(db_path, tmp_path, **extra), cwd=str(tmp_path))
    async with Client(params, mode="legacy", read_timeout_seconds=30) as client:
        yield client


def initialize(rid: Any = 0, version: str = "2025-06-18") -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})


INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}'


def raw_session(db_path: Path, tmp_path: Path, lines: list[str], answers: int, **extra: str) -> tuple[list[str], str]:
    """Write ``lines`` in one go to a fresh ``kms mcp``, read ``answers`` lines back; (answers, stderr)."""
    log = tmp_path / "raw.log"
    with open(log, "wb") as errfile:
        proc = subprocess.Popen([sys.executable, "-m", "kmscli", "mcp"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errfile, env=server_env(db_path, tmp_path, **extra),
                                cwd=tmp_path)
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + 60
        while len(out) < answers and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break
                out.append(line.decode())
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    err = log.read_text(encoding="utf-8", errors="replace")
    assert len(out) == answers, f"{out}\n{err[-3000:]}"
    return out, err


async def test_second_start_answers_from_the_cache(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    assert not cache_file(db_path).exists()
    async with sdk_client(db_path, tmp_path, tmp_path / "first.log") as client:
        first = (await client.list_tools()).tools
        result = await client.call_tool("kms_search", {"query": "shakshuka", "limit": 3})
        assert not result.is_error
    assert ANSWERED not in (tmp_path / "first.log").read_text()
    cache = json.loads(cache_file(db_path).read_text())
    assert cache["key"]["writeTools"] is False and "2025-06-18" in cache["protocolVersions"]

    async with sdk_client(db_path, tmp_path, tmp_path / "second.log") as client:
        second = (await client.list_tools()).tools
        result = await client.call_tool("kms_search", {"query": "shakshuka", "limit": 3})
        assert not result.is_error, result.structured_content
        assert result.structured_content["hits"][0]["title"] == "Shakshuka"
        read = await client.call_tool("kms_read", {"noteId": result.structured_content["hits"][0]["noteId"]})
        assert "Eggs poached" in read.structured_content["body"]
    log = (tmp_path / "second.log").read_text()
    assert ANSWERED in log, log[-3000:]
    assert "differently" not in log and "Traceback" not in log, log[-3000:]
    assert [t.model_dump() for t in second] == [t.model_dump() for t in first]


@pytest.mark.parametrize("version", ["2025-06-18", "2024-11-05", "1999-01-01"])
def test_cached_answers_are_the_sdk_bytes(indexed: apsw.Connection, db_path: Path, tmp_path: Path,
                                          version: str) -> None:
    lines = [initialize(1, version), INITIALIZED, '{"jsonrpc":"2.0","id":"two","method":"tools/list"}']
    sdk, err = raw_session(db_path, tmp_path, lines, 2, KMS_MCP_FASTPATH="0")  # the SDK answers; cache written
    assert ANSWERED not in err and cache_file(db_path).exists()
    cached, err = raw_session(db_path, tmp_path, lines, 2)
    assert ANSWERED in err, err[-3000:]
    assert cached == sdk  # byte for byte, initialize and tools/list
    assert json.loads(cached[0])["result"]["protocolVersion"] == (version if version != "1999-01-01" else "2025-11-25")
    assert WRITE_TOOLS.isdisjoint(t["name"] for t in json.loads(cached[1])["result"]["tools"])


@pytest.mark.parametrize("writes", ["1", "0"])
async def test_cache_for_another_write_setting_is_not_used(indexed: apsw.Connection, db_path: Path,
                                                            tmp_path: Path, writes: str) -> None:
    other = "0" if writes == "1" else "1"
    async with sdk_client(db_path, tmp_path, tmp_path / "a.log", KMS_AGENT_WRITE_TOOLS_ENABLED=other) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert (WRITE_TOOLS <= names) == (other == "1")
    assert json.loads(cache_file(db_path).read_text())["key"]["writeTools"] is (other == "1")

    async with sdk_client(db_path, tmp_path, tmp_path / "b.log", KMS_AGENT_WRITE_TOOLS_ENABLED=writes) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert (WRITE_TOOLS <= names) == (writes == "1")
        assert not (await client.call_tool("kms_search", {"query": "shakshuka"})).is_error
    log = (tmp_path / "b.log").read_text()
    assert "does not match" in log and "from the handshake cache" not in log, log[-3000:]
    assert json.loads(cache_file(db_path).read_text())["key"]["writeTools"] is (writes == "1")  # rewritten


def test_write_flag_from_the_settings_file_keys_the_cache(indexed: apsw.Connection, db_path: Path,
                                                          tmp_path: Path) -> None:
    from server.fastpath import write_tools_listed

    env = {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": str(tmp_path / "config.toml")}
    assert write_tools_listed(env) is False
    (tmp_path / "config.toml").write_text("[agent]\nwrite = true\n")
    assert write_tools_listed(env) is True  # kms.enabled / agent.read: auto, and a vault is registered
    assert write_tools_listed({**env, "KMS_ENABLED": "off"}) is False
    with pytest.raises(ValueError):
        write_tools_listed({**env, "KMS_ENABLED": "maybe"})


SEQUENCES = {
    "malformed first line": ["not json at all", initialize(3), INITIALIZED,
                             '{"jsonrpc":"2.0","id":4,"method":"tools/list"}'],
    "ping first": ['{"jsonrpc":"2.0","id":1,"method":"ping"}', initialize(3), INITIALIZED,
                   '{"jsonrpc":"2.0","id":4,"method":"tools/list"}'],
    "tools/list before initialize": ['{"jsonrpc":"2.0","id":1,"method":"tools/list"}', initialize(3), INITIALIZED,
                                     '{"jsonrpc":"2.0","id":4,"method":"tools/list"}'],
    "odd initialize params": [json.dumps({"jsonrpc": "2.0", "id": 3, "method": "initialize",
                                          "params": {"protocolVersion": "2025-06-18"}}),
                              '{"jsonrpc":"2.0","id":4,"method":"ping"}'],
    "second initialize": [initialize(3), INITIALIZED, initialize(5), '{"jsonrpc":"2.0","id":4,"method":"tools/list"}'],
}


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_unexpected_openings_get_the_sdk_answer(indexed: apsw.Connection, db_path: Path, tmp_path: Path,
                                                name: str) -> None:
    lines = SEQUENCES[name]
    answers = sum(1 for line in lines if '"id"' in line)
    raw_session(db_path, tmp_path, [initialize(1), INITIALIZED], 1, KMS_MCP_FASTPATH="0")  # writes the cache
    assert cache_file(db_path).exists()
    sdk, _ = raw_session(db_path, tmp_path, lines, answers, KMS_MCP_FASTPATH="0")
    ours, err = raw_session(db_path, tmp_path, lines, answers)
    assert ours == sdk, err[-3000:]
    assert "Traceback" not in err and "differently" not in err, err[-3000:]


async def test_sdk_client_in_auto_mode_is_served_by_the_sdk(indexed: apsw.Connection, db_path: Path,
                                                            tmp_path: Path) -> None:
    """The SDK client's default opening is a ``server/discover`` probe: not ours to answer."""
    raw_session(db_path, tmp_path, [initialize(1), INITIALIZED], 1)
    params = StdioServerParameters(command=sys.executable, args=["-m", "kmscli", "mcp"],
                                   env=server_env(db_path, tmp_path), cwd=str(tmp_path))
    async with Client(params, read_timeout_seconds=30) as client:
        assert "kms_search" in {t.name for t in (await client.list_tools()).tools}
        assert not (await client.call_tool("kms_search", {"query": "shakshuka"})).is_error


def test_stray_output_cannot_reach_the_wire(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    """While the fast path holds the connection, fd 1 is stderr and fd 0 is /dev/null."""
    raw_session(db_path, tmp_path, [initialize(1), INITIALIZED], 1)
    code = ("import os, sys, runpy; sys.argv = ['kms', 'mcp']; import server.fastpath as f; orig = f.Handoff.serve\n"
            "def serve(self, loader):\n"
            "    print('stray print'); os.write(1, b'stray write\\n'); assert os.read(0, 10) == b''\n"
            "    return orig(self, loader)\n"
            "f.Handoff.serve = serve; runpy.run_module('kmscli', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], input=(initialize(1) + "\n").encode(), capture_output=True,
                          env=server_env(db_path, tmp_path), cwd=tmp_path, timeout=60)
    out = proc.stdout.decode().splitlines()
    assert len(out) == 1 and json.loads(out[0])["id"] == 1, proc.stdout.decode() + proc.stderr.decode()[-2000:]
    assert "stray print" in proc.stderr.decode() and "stray write" in proc.stderr.decode()
