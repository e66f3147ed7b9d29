"""A keyed write is applied at most once whatever instant its service dies (``server.writes.once``).

A real ``kms serve`` (Streamable HTTP on a free loopback port, a real token) is started with
``KMS_CRASH_AT=<point>`` (``server.writes.crash_points``) and kills itself (SIGKILL) at that point of an
append, an insert, a create or a move; a new service is started, and the agent retries with the same
``idempotencyKey``. Whatever the point: the text (or the note, or the move) is there exactly once, the call
has exactly one provenance row, the retry's answer is that call's, the index matches the files, and no
journal is left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support.organize import index, make_vault
from support.service import Served

from server.activity import tokens
from server.config.scopes import Scopes
from server.writes.crash_points import POINTS

FILES = {"drafts/Draft.md": "# Draft\n\nfirst line\n", "notes/Keep.md": "# Keep\n\nkept\n"}
CASES: dict[str, dict[str, Any]] = {
    "kms_append": {"noteId": "drafts/Draft.md", "content": "APPENDED ONCE"},
    "kms_insert_at": {"noteId": "drafts/Draft.md", "content": "INSERTED ONCE", "position": {"beforeHeading": "Draft"}},
    "kms_create": {"title": "Fresh", "folder": "drafts", "content": "CREATED ONCE"},
    "kms_move": {"noteId": "drafts/Draft.md", "folder": "notes"},
}


@contextlib.contextmanager
def serving(db_path: Path, crash_at: str | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A real ``kms serve`` for this database, until the block ends (stopped with SIGTERM, or already dead)."""
    served = Served.start(db_path, KMS_CRASH_AT=crash_at or "")
    try:
        yield served.proc, served.url
    finally:
        served.stop()


@contextlib.asynccontextmanager
async def client(url: str, secret: str) -> AsyncIterator[Any]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as c:
        yield c


async def call(url: str, secret: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(30):
        async with client(url, secret) as c:
            result = await c.call_tool(tool, args)
            return {**result.structured_content, "_error": bool(result.is_error)}


def vault_texts(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.md"))}


def index_matches(conn: apsw.Connection, root: Path) -> bool:
    files = {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*.md")}
    return {str(path): digest for path, digest in conn.execute("SELECT path, content_hash FROM notes")} == files


def journals(db_path: Path) -> list[str]:
    folder = db_path.parent / "locks" / "units"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def wait_for(check: Any, what: str, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def applied_once(tool: str, texts: dict[str, str]) -> None:
    """The call's change is in the vault exactly once."""
    if tool == "kms_append":
        assert texts["drafts/Draft.md"].count("APPENDED ONCE") == 1, texts
    elif tool == "kms_insert_at":
        assert texts["drafts/Draft.md"].count("INSERTED ONCE") == 1, texts
    elif tool == "kms_create":
        made = [p for p in texts if "Fresh" in p]
        assert made == ["drafts/Fresh.md"] and texts[made[0]].count("CREATED ONCE") == 1, texts
    else:
        assert "drafts/Draft.md" not in texts and texts["notes/Draft.md"] == FILES["drafts/Draft.md"], texts


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("tool", sorted(CASES))
def test_a_keyed_write_lands_once_whenever_its_service_dies(
    tool: str, point: str, tmp_path: Path, conn: apsw.Connection, db_path: Path
) -> None:
    (tmp_path / "config.toml").write_text("[agent]\nwrite = true\nedit = true\norganize = true\n")
    root = make_vault(tmp_path / "v", FILES)
    index(conn, root)
    agent, secret = tokens.create(conn, label="agent", scopes=Scopes.parse("tier:organize"))
    args = {**CASES[tool], "idempotencyKey": f"once-{tool}"}

    with serving(db_path, crash_at=point) as (proc, url):
        with pytest.raises(Exception):  # noqa: B017 - the connection dies with the service: the SDK's own error
            anyio.run(call, url, secret, tool, args)
        assert proc.wait(20) == -signal.SIGKILL, "the service did not die at " + point  # (the hook's, no other)

    with serving(db_path) as (_proc, url):
        answer = anyio.run(call, url, secret, tool, args)
        assert not answer["_error"], answer
        again = anyio.run(call, url, secret, tool, args)  # a second retry: the same answer, nothing written
        assert again["replayed"] and again["invocationId"] == answer["invocationId"], again
        wait_for(lambda: journals(db_path) == [], f"journals left: {journals(db_path)}")
        wait_for(lambda: index_matches(conn, root), "the index does not match the files")

    applied_once(tool, vault_texts(root))
    rows = conn.execute(
        "SELECT id, status, path FROM tool_invocations WHERE session_id = ? AND tool = ? AND idempotency_key = ?",
        (agent.session_id, tool, args["idempotencyKey"]),
    ).fetchall()
    assert len(rows) == 1 and rows[0][1] == "success", rows  # one call, one provenance row
    assert answer["invocationId"] == rows[0][0] and answer["path"] == rows[0][2], (answer, rows)
    assert bool(answer.get("replayed")) == (point == "write.recorded"), answer  # recorded: answered from its row


def test_a_retry_is_refused_when_a_person_saved_the_note_before_kms_could_take_the_crashed_write_back(
    tmp_path: Path, conn: apsw.Connection, db_path: Path
) -> None:
    """The append landed, the service died, the person saved the note (kms's text in it) before the next
    service started: kms keeps the journal (never writes over the person's save) and cannot tell whether
    the call landed, so the retry is refused, and nothing is written twice. A new key writes again."""
    (tmp_path / "config.toml").write_text("[agent]\nwrite = true\nedit = true\n")
    root = make_vault(tmp_path / "v", FILES)
    index(conn, root)
    _agent, secret = tokens.create(conn, label="agent", scopes=Scopes.parse("tier:edit"))
    args = {**CASES["kms_append"], "idempotencyKey": "once-kept"}
    with serving(db_path, crash_at="write.landed") as (proc, url):
        with pytest.raises(Exception):  # noqa: B017 - the connection dies with the service
            anyio.run(call, url, secret, "kms_append", args)
        assert proc.wait(20) == -signal.SIGKILL
    note = root / "drafts" / "Draft.md"
    note.write_text(note.read_text() + "the person's line\n")
    with serving(db_path) as (_proc, url):
        refused = anyio.run(call, url, secret, "kms_append", args)
        assert refused["_error"] and refused["error"] == "conflict" and "idempotencyKey" in refused["message"]
        assert anyio.run(call, url, secret, "kms_append", args)["error"] == "conflict"  # every retry
        text = note.read_text()
        assert text.count("APPENDED ONCE") == 1 and text.endswith("the person's line\n"), text
        assert [j for j in journals(db_path) if j.endswith(".kept")], journals(db_path)  # for `kms doctor`
        fresh = anyio.run(call, url, secret, "kms_append", {**args, "idempotencyKey": "a-new-key"})
        assert not fresh["_error"], fresh
    assert note.read_text().count("APPENDED ONCE") == 2
