"""A full disk under the database: a write call answers a typed ``disk-full`` error saying so (not
``internal``), changes no note (the file kms already replaced is put back as it was read), and the
server goes on answering."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.mcp_session import mcp_client
from support.sql import tuples, value
from support.vaults import note_id

from server.activity import unrecorded
from server.config.session_contract import SessionConfig
from server.mcp.tools.dispatch import ToolRunner
from server.store.db import thread_connection


def test_a_full_database_disk_is_a_typed_error(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    nid = note_id(indexed, "Home")
    path = vault_dir / value(indexed, "SELECT path FROM notes WHERE id = ?", (nid,))
    config = SessionConfig.from_env({"KMS_DB_PATH": str(db_path)}, write_enabled=True, watch=False)
    runner = ToolRunner(config)
    try:
        assert not runner.call("kms_append", {"noteId": nid, "content": "fits"})[1]
        conn = thread_connection(db_path)  # the write path's own connection (this thread)
        before = path.read_bytes()
        pages = value(conn, "PRAGMA page_count")
        conn.execute(f"PRAGMA max_page_count = {pages}")  # what a full disk looks like to SQLite
        answer, is_error = runner.call("kms_append", {"noteId": nid, "content": "x" * 40_000})
        assert is_error and answer["error"] == "disk-full", answer
        assert "disk holding the database is full" in answer["message"]
        assert path.read_bytes() == before  # the write that could not be recorded changed nothing
        assert unrecorded.waiting(db_path) == 1  # the refusal waits next to the database for room
        answer, is_error = runner.call("kms_create", {"title": "Big", "folder": "drafts", "content": "y" * 40_000})
        assert is_error and answer["error"] == "disk-full", answer
        assert not (vault_dir / "drafts" / "Big.md").exists()  # the create is taken back too
        assert unrecorded.waiting(db_path) >= 1  # (the first refusal may have found room for its small row)
        conn.execute(f"PRAGMA max_page_count = {pages * 100}")  # room again: the next write works
        answer, is_error = runner.call("kms_append", {"noteId": nid, "content": "room again"})
        assert not is_error, answer
        assert path.read_bytes().endswith(b"room again\n")
        assert unrecorded.waiting(db_path) == 0  # (the journal stays, blank: its reserve)
        rows = tuples(
            indexed,
            "SELECT status, error, message, input_summary FROM tool_invocations WHERE tool = 'kms_append' ORDER BY id",
        )
        assert [(s, e) for s, e, _m, _i in rows] == [("success", None), ("error", "disk-full"), ("success", None)]
        assert indexed.execute("SELECT error FROM tool_invocations WHERE tool = 'kms_create'").fetchall() == [
            ("disk-full",)
        ]
        assert "the note was left as it was" in rows[1][2] and "(40000 chars)" in rows[1][3]
    finally:
        runner.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 24 MiB file system (tmpfs) for the database's folder (the suite runs as root here)."""
    mnt = tmp_path / "dbdisk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], check=True, capture_output=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder: Path) -> Path:
    """Take every free byte of ``folder``'s file system."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 16, 1 << 12, 1 << 9, 1):
            with contextlib.suppress(OSError):
                while f.write(b"\0" * size):
                    pass
    return filler


async def test_a_really_full_database_disk_changes_no_note(
    small_disk: Path, vault_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    db = small_disk / "kms.db"
    monkeypatch.setenv("KMS_DB_PATH", str(db))
    conn = connect(db)
    index_vault(conn, add_vault(conn, vault_dir, "sample"))
    nid = note_id(conn, "Home")
    path = vault_dir / value(conn, "SELECT path FROM notes WHERE id = ?", (nid,))
    try:
        async with mcp_client(db, write_enabled=True) as client:
            assert not (await client.call_tool("kms_append", {"noteId": nid, "content": "fits"})).is_error
            before = path.read_bytes()
            filler = fill(small_disk)
            # room for the rate-limit slot's small commit, none for the index of a 45 kB append: the
            # note file is replaced first, then the database cannot record it
            os.truncate(filler, filler.stat().st_size - 64 * 1024)
            r = await client.call_tool("kms_append", {"noteId": nid, "content": "big line\n" * 5_000})
            assert r.is_error and r.structured_content["error"] == "disk-full", r.structured_content
            assert path.read_bytes() == before  # no note changed by a write that could not be recorded
            assert "KiB free" in (unrecorded.room_report(db)["warning"] or "")  # what kms doctor says
            assert (await client.call_tool("kms_read", {"noteId": nid})).structured_content["body"]  # still serving
            filler.unlink()
            r = await client.call_tool("kms_append", {"noteId": nid, "content": "room again"})
            assert not r.is_error, r.structured_content
            assert path.read_bytes().endswith(b"room again\n")
            assert unrecorded.room_report(db)["warning"] is None
        # the refusal was kept beside the database and recorded by the next call that had room
        assert [
            tuple(r)
            for r in conn.execute("SELECT status, error FROM tool_invocations WHERE tool = 'kms_append' ORDER BY id")
        ] == [("success", None), ("error", "disk-full"), ("success", None)]
    finally:
        conn.close()


def test_a_disk_full_before_the_first_write_call_still_records_every_refusal(
    small_disk: Path, vault_dir: Path, tmp_path: Path
) -> None:
    """The journal's reserve is made when ``kms mcp`` starts with writes on: refusals of a server whose
    database disk filled before its first write call are kept there, and recorded once there is room."""
    import json
    import sys

    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    db = small_disk / "kms.db"
    conn = connect(db)
    index_vault(conn, add_vault(conn, vault_dir, "sample"))
    nid = note_id(conn, "Home")
    env = {
        **os.environ,
        "KMS_DB_PATH": str(db),
        "KMS_CONFIG": str(tmp_path / "config.toml"),
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
        "KMS_AGENT_WRITE_TOOLS_ENABLED": "1",
        "KMS_EMBED_ENABLED": "0",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def ask(rid: int, method: str, params: dict) -> dict:
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
        stdin.flush()
        while True:
            answer = json.loads(stdout.readline())
            if answer.get("id") == rid:
                return answer

    try:
        ask(
            0,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        )
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        filler = fill(small_disk)  # before any write call
        for n in range(5):
            args = {"noteId": nid, "content": f"no room {n}"}
            r = ask(n + 1, "tools/call", {"name": "kms_append", "arguments": args})
            assert r["result"]["isError"], r
        filler.unlink()
        r = ask(9, "tools/call", {"name": "kms_append", "arguments": {"noteId": nid, "content": "room again"}})
        assert not r["result"]["isError"], r
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    try:
        got = conn.execute("SELECT status FROM tool_invocations WHERE tool = 'kms_append' ORDER BY id").fetchall()
        assert [s for (s,) in got] == ["error"] * 5 + ["success"]
        assert unrecorded.waiting(db) == 0
    finally:
        conn.close()
