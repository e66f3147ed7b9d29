"""Many sessions, one server: one ``SessionHub`` and one SDK server object serve several real MCP clients,
each its own session with its own scope, tiers, allowlist and limits, in both protocol eras.

What a session may see and do comes from its own ``SessionConfig`` only: the tool list, the vaults its
reads and writes reach, its rate limit, and the session id on its provenance rows. A write one session
holds up (a note locked by another writer) never holds up another session, nor the same session's reads.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from mcp.client import Client
from support.sql import pairs, value
from support.vaults import write
from support.waiting import threads_waiting_in, until_async

from server.config.session_contract import SessionConfig
from server.index.indexer import index_vault
from server.mcp.hub import SessionHub
from server.mcp.process import ProcessServices
from server.mcp.serve import build_server
from server.mcp.tools import REGISTRY
from server.mcp.tools.dispatch import ToolRunner
from server.vault.registry import add_vault

MODES = ("legacy", "auto")  # the 2025 handshake era, and the 2026 per-request era


@pytest.fixture
def two_vaults(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    a, b = tmp_path / "vault-a", tmp_path / "vault-b"
    write(a / "Alpha.md", "# Alpha\n\nThe lighthouse keeper's log.\n")
    write(b / "Beta.md", "# Beta\n\nAnother lighthouse.\n")
    write(b / "drafts" / "Draft.md", "# Draft\n\nA lighthouse draft.\n")
    for root, name in ((a, "a"), (b, "b")):
        index_vault(conn, add_vault(conn, root, name))
    return conn


def config(db_path: Path, session_id: str, **fields: Any) -> SessionConfig:
    env = {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]}
    return SessionConfig.from_env(env, watch=False, session_id=session_id, **fields)


@contextlib.asynccontextmanager
async def served(hub: SessionHub, mode: str, *runners: ToolRunner) -> AsyncIterator[list[Any]]:
    """One real client per session, all connected to one server object."""
    server = build_server(hub)
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for runner in runners:
            with hub.connection(runner):
                clients.append(await stack.enter_async_context(Client(server, mode=mode)))
        yield clients


async def call(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    return {**result.structured_content, "_error": bool(result.is_error)}


def expected_tools(cfg: SessionConfig) -> set[str]:
    """The registry's tools a session with ``cfg`` lists: read tools always, the others by their tier."""
    return {s.name for s in REGISTRY if s.tier == "read" or cfg.tier_enabled(s.tier)}


@pytest.mark.parametrize("mode", MODES)
async def test_sessions_in_one_server_see_only_their_own_tools_vaults_and_limits(
    two_vaults: apsw.Connection, db_path: Path, mode: str
) -> None:
    reader = config(db_path, "sreader00000a", vault="a")
    writer = config(
        db_path, "swriter00000b", vault="b", write_enabled=True, edit_enabled=True, allowlist=("drafts",), per_minute=2
    )
    admin = config(
        db_path, "sadmin000000c", write_enabled=True, edit_enabled=True, organize_enabled=True, per_minute=10
    )
    hub = SessionHub(ProcessServices.for_config(reader))
    runners = [hub.open(c) for c in (reader, writer, admin)]
    try:
        async with served(hub, mode, *runners) as (ra, wb, ad):
            for client, cfg in ((ra, reader), (wb, writer), (ad, admin)):
                assert {t.name for t in (await client.list_tools()).tools} == expected_tools(cfg)
            assert expected_tools(reader) < expected_tools(writer) < expected_tools(admin)

            # scope: each session's reads reach its own vault (the unscoped one both)
            def vaults(answer: dict[str, Any]) -> set[str]:
                return {h["vault"] for h in answer["hits"]}

            assert vaults(await call(ra, "kms_search", {"query": "lighthouse"})) == {"a"}
            assert vaults(await call(wb, "kms_search", {"query": "lighthouse"})) == {"b"}
            assert vaults(await call(ad, "kms_search", {"query": "lighthouse"})) == {"a", "b"}
            beta = (await call(wb, "kms_search", {"query": "Beta"}))["hits"][0]["noteId"]
            assert (await call(ra, "kms_read", {"noteId": beta}))["error"] == "not-found"

            # tiers: the reader's write is refused by its own gate, the writer's organize tool too
            assert (await call(ra, "kms_create", {"title": "No"}))["error"] == "feature-disabled"
            assert (await call(wb, "kms_trash", {"noteId": beta}))["error"] == "feature-disabled"

            # allowlist and limits: the writer's own
            assert (await call(wb, "kms_create", {"title": "Outside"}))["error"] == "folder-denied"
            for i in range(2):
                assert not (await call(wb, "kms_create", {"title": f"W{i}", "folder": "drafts"}))["_error"]
            assert (await call(wb, "kms_create", {"title": "W2", "folder": "drafts"}))["error"] == "rate-limited"
            made = await call(ad, "kms_create", {"title": "Admin note", "vault": "a"})  # not the writer's limit
            assert not made["_error"] and made["vault"] == "a"
    finally:
        assert hub.close_all()

    rows = two_vaults.execute(
        "SELECT session_id, tool, status, coalesce(error, '') FROM tool_invocations ORDER BY id"
    ).fetchall()
    assert rows == [
        ("sreader00000a", "kms_create", "refused", "feature-disabled"),
        ("swriter00000b", "kms_trash", "refused", "feature-disabled"),
        ("swriter00000b", "kms_create", "folder-denied", "folder-denied"),
        ("swriter00000b", "kms_create", "success", ""),
        ("swriter00000b", "kms_create", "success", ""),
        ("swriter00000b", "kms_create", "rate-limited", "rate-limited"),
        ("sadmin000000c", "kms_create", "success", ""),
    ]
    ended = pairs(two_vaults, "SELECT id, ended_at IS NOT NULL FROM sessions")
    assert ended == {"sreader00000a": 1, "swriter00000b": 1, "sadmin000000c": 1}


async def test_a_held_write_holds_up_no_other_session_nor_its_own_reads(
    two_vaults: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    """Session A's append waits on a note another writer holds locked; meanwhile A's own reads and session
    B's reads and writes are answered. Once the lock is let go, A's append lands."""
    from server.store.locks import file_lock
    from server.writes.context import lock_dir_for

    a = config(db_path, "sholder00000a", write_enabled=True)
    b = config(db_path, "sother000000b", write_enabled=True)
    hub = SessionHub(ProcessServices.for_config(a))
    runners = [hub.open(a), hub.open(b)]
    beta = two_vaults.execute("SELECT id FROM notes WHERE title = 'Beta'").fetchall()[0][0]
    alpha = two_vaults.execute("SELECT id FROM notes WHERE title = 'Alpha'").fetchall()[0][0]
    beta_file = value(
        two_vaults,
        "SELECT v.root || '/' || n.path FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE n.id = ?",
        (beta,),
    )
    try:
        async with served(hub, "auto", *runners) as (ca, cb):
            held: list[dict[str, Any]] = []
            lock = contextlib.ExitStack()
            lock.enter_context(file_lock(Path(beta_file), lock_dir_for(two_vaults)))  # another writer holds Beta

            async def held_append() -> None:
                held.append(await call(ca, "kms_append", {"noteId": beta, "content": "held line"}))

            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(held_append)
                    # A's append is now waiting for the lock: a thread of this process is inside lock_file
                    await until_async(
                        lambda: threads_waiting_in("lock_file", "server/store/locks.py"), what="A's append waiting"
                    )
                    with anyio.fail_after(10):
                        assert (await call(ca, "kms_read", {"noteId": alpha}))["title"] == "Alpha"
                        assert (await call(cb, "kms_search", {"query": "lighthouse"}))["hits"]
                        assert not (await call(cb, "kms_append", {"noteId": alpha, "content": "B's line"}))["_error"]
                    assert not held  # A's append still waits: only it is held up
                    lock.close()  # the other writer lets go: A's append goes on
            finally:
                lock.close()
            assert len(held) == 1 and not held[0]["_error"], held
    finally:
        hub.close_all()
    assert Path(beta_file).read_text().rstrip().endswith("held line")
