"""A ``kms claude`` session's agent changing notes with its own tools rather than through kms (issue 28): the
file changes, the session's PostToolUse hook reports it, the watcher sees it; and someone else's save."""

from __future__ import annotations

from pathlib import Path

import apsw

from server.activity import session_material
from server.index.incremental import reindex_file
from server.vault.registry import Vault


def report_tool(
    conn: apsw.Connection, session: str, path: Path, *, tool: str = "Edit", at: float | None = None
) -> None:
    """The session's PostToolUse hook reports its agent's ``tool`` changing ``path`` (``at``: when, now if None)."""
    event = {"hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": {"file_path": str(path)}}
    session_material.record_event(conn, session, event, now=at)


def agent_tool(
    conn: apsw.Connection,
    vault: Vault,
    session: str,
    relpath: str,
    data: bytes | None,
    *,
    tool: str = "Edit",
    at: float | None = None,
) -> None:
    """The agent's tool writes ``relpath`` (``None``: removes it, which no hook reports), its hook reports it
    and the watcher sees it."""
    full = vault.root / relpath
    if data is None:
        full.unlink()
    else:
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
        report_tool(conn, session, full, tool=tool, at=at)
    reindex_file(conn, vault, relpath)


def someone_else(conn: apsw.Connection, vault: Vault, relpath: str, data: bytes) -> None:
    """Another program (the person's editor, a sync tool) saves ``relpath``; the watcher sees it."""
    (vault.root / relpath).write_bytes(data)
    reindex_file(conn, vault, relpath)
