"""What the agent host tells kms about a session through its hooks, and what the session note is built from
besides provenance and reads (tables of m024).

- ``session_records``: one row per session: the host's conversation id, its end and reason, the compaction
  summary and the last assistant message the host reported, the prompts (only when ``capture.prompts`` is
  on), the session note once written (and the hash kms wrote, so a person's edit of it is never
  overwritten) and when the Stop rule asked the agent to capture.
- ``session_searches``: the queries of the search tools (recorded off the request path by the read tracker).
- ``session_captures``: what the agent recorded with ``kms_capture`` (decisions, findings, next steps, links).
- ``session_files``: files the agent changed outside kms with the host's own tools (PostToolUse), with the
  vault and vault path they lie in. ``files_for_session`` and ``files_for_path`` are the public queries (the
  note history attributes outside edits through ``files_for_path``).

The transcript a host keeps is never read: its format is the host's and changes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from server.store.db import rows, write_tx
from server.vault.files import sha256_hex
from server.vault.registry import list_vaults

CAPTURE_KINDS = ("decision", "finding", "next", "link")
MAX_HOST_TEXT = 4000  # characters kept of a compaction summary or a last message
MAX_PROMPTS = 50  # prompts kept per session (capture.prompts)
MAX_QUERY_CHARS = 300
# the host's file tools and the input key naming the file each changes (Bash names none: not attributed)
FILE_TOOLS: dict[str, str] = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}


@dataclass(frozen=True)
class SessionRecord:
    session_id: str
    host_session: str | None
    ended_at: float | None
    end_reason: str | None
    compact_summary: str | None
    last_message: str | None
    prompts: list[str]
    note_id: str | None
    note_vault: str | None
    note_path: str | None
    note_hash: str | None
    asked_at: float | None
    updated_at: float


@dataclass(frozen=True)
class OutsideFile:
    """A file the agent changed with the host's own tool (``session_files``)."""

    id: int
    session_id: str
    at: float
    tool: str
    file: str
    vault_id: int | None
    path: str | None
    hash_after: str | None


def _clip(text: Any, limit: int = MAX_HOST_TEXT) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def get(conn: apsw.Connection, session_id: str) -> SessionRecord | None:
    found = rows(conn, "SELECT * FROM session_records WHERE session_id = ?", (session_id,))
    if not found:
        return None
    r = found[0]
    return SessionRecord(**{**r, "prompts": json.loads(r["prompts"]) if r["prompts"] else []})


def _upsert(conn: apsw.Connection, session_id: str, now: float, **fields: Any) -> None:
    """One row per session: created on its first event, the given columns set (None leaves one as it is)."""
    cols = {k: v for k, v in fields.items() if v is not None}
    with write_tx(conn):
        conn.execute(
            "INSERT INTO session_records(session_id, updated_at) VALUES (?, ?) "
            "ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at",
            (session_id, now),
        )
        if cols:
            sets = ", ".join(f"{k} = ?" for k in cols)
            conn.execute(f"UPDATE session_records SET {sets} WHERE session_id = ?", (*cols.values(), session_id))


def record_event(
    conn: apsw.Connection,
    session_id: str,
    event: Mapping[str, Any],
    *,
    keep_prompts: bool = False,
    now: float | None = None,
) -> None:
    """Keep what a hook event carries that the session note uses (anything else in it is dropped)."""
    at = time.time() if now is None else now
    name = event.get("hook_event_name")
    host = event.get("session_id") if isinstance(event.get("session_id"), str) else None
    fields: dict[str, Any] = {"host_session": host}
    if name == "SessionEnd":
        fields.update(ended_at=at, end_reason=_clip(event.get("reason"), 100) or "other")
    elif name == "PostCompact":
        fields["compact_summary"] = _clip(event.get("compact_summary"))
    elif name == "Stop" or name == "SubagentStop":
        fields["last_message"] = _clip(event.get("last_assistant_message"))
    elif name == "UserPromptSubmit" and keep_prompts and (prompt := _clip(event.get("prompt"), 2000)):
        now_prompts = (get(conn, session_id) or _EMPTY).prompts
        fields["prompts"] = json.dumps([*now_prompts, prompt][-MAX_PROMPTS:], ensure_ascii=False)
    elif name == "PostToolUse":
        record_tool_use(conn, session_id, event, now=at)
    _upsert(conn, session_id, at, **fields)


_EMPTY = SessionRecord("", None, None, None, None, None, [], None, None, None, None, None, 0.0)


def note_of(conn: apsw.Connection, session_id: str) -> str | None:
    """The id of the session's note, while it is indexed and visible (the dashboard opens it)."""
    found = conn.execute(
        "SELECT n.id FROM session_records r JOIN notes n ON n.id = r.note_id "
        "WHERE r.session_id = ? AND n.hidden_at IS NULL",
        (session_id,),
    ).fetchall()
    return str(found[0][0]) if found else None


def set_note(conn: apsw.Connection, session_id: str, *, note_id: str, vault: str, path: str, digest: str) -> None:
    """The session note kms wrote (its id, place and the hash of the bytes it wrote)."""
    _upsert(conn, session_id, time.time(), note_id=note_id, note_vault=vault, note_path=path, note_hash=digest)


def mark_asked(conn: apsw.Connection, session_id: str, now: float | None = None) -> None:
    at = time.time() if now is None else now
    _upsert(conn, session_id, at, asked_at=at)


# ----------------------------------------------------------------------------- searches and captures


def record_searches(conn: apsw.Connection, session_id: str, searches: Sequence[tuple[str, str, float]]) -> None:
    """(tool, query, at) of search calls, inside the caller's transaction (the read tracker batches them)."""
    conn.executemany(
        "INSERT INTO session_searches(session_id, at, tool, query) VALUES (?, ?, ?, ?)",
        [(session_id, at, tool, q[:MAX_QUERY_CHARS]) for tool, q, at in searches],
    )


def searches(conn: apsw.Connection, session_id: str, limit: int = 200) -> list[dict[str, Any]]:
    return rows(
        conn,
        "SELECT tool, query, at FROM session_searches WHERE session_id = ? ORDER BY id LIMIT ?",
        (session_id, limit),
    )


def add_captures(
    conn: apsw.Connection, session_id: str, items: Iterable[tuple[str, str]], now: float | None = None
) -> None:
    """Items the agent captured (``kms_capture``), in the order given. Called inside the write's commit."""
    at = time.time() if now is None else now
    items = list(items)
    if any(kind not in CAPTURE_KINDS for kind, _text in items):
        raise ValueError(f"capture kind must be one of {CAPTURE_KINDS}")
    with write_tx(conn):
        conn.executemany(
            "INSERT INTO session_captures(session_id, at, kind, text) VALUES (?, ?, ?, ?)",
            [(session_id, at, kind, text) for kind, text in items],
        )


def captures(conn: apsw.Connection, session_id: str) -> list[dict[str, Any]]:
    return rows(conn, "SELECT kind, text, at FROM session_captures WHERE session_id = ? ORDER BY id", (session_id,))


# ----------------------------------------------------------------------------- files changed outside kms


def _file_hash(path: Path) -> str | None:
    """The file's version token as the index writes it (``notes.content_hash``), or None if unreadable."""
    try:
        return sha256_hex(path.read_bytes())
    except OSError:
        return None


def vault_path_of(conn: apsw.Connection, file: Path) -> tuple[int, str] | None:
    """(vault id, vault-relative path) of an absolute file inside a registered vault, else None."""

    try:
        real = file.resolve()
    except OSError:
        return None
    for v in list_vaults(conn):
        try:
            rel = real.relative_to(Path(v.root).resolve())
        except (ValueError, OSError):
            continue
        return v.id, rel.as_posix()
    return None


def record_tool_use(
    conn: apsw.Connection, session_id: str, event: Mapping[str, Any], now: float | None = None
) -> OutsideFile | None:
    """Record a host file tool's call (PostToolUse) as a file this session changed outside kms."""
    tool = event.get("tool_name")
    tool_input = event.get("tool_input")
    key = FILE_TOOLS.get(tool) if isinstance(tool, str) else None
    if key is None or not isinstance(tool_input, dict) or not isinstance(tool_input.get(key), str):
        return None
    named = Path(tool_input[key])
    if not named.is_absolute():
        cwd = event.get("cwd")
        named = Path(cwd) / named if isinstance(cwd, str) else named
    at = time.time() if now is None else now
    where = vault_path_of(conn, named)
    digest = _file_hash(named)
    with write_tx(conn):
        conn.execute(
            "INSERT INTO session_files(session_id, at, tool, file, vault_id, path, hash_after) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session_id, at, tool, str(named), where[0] if where else None, where[1] if where else None, digest),
        )
        fid = conn.last_insert_rowid()
    assert isinstance(tool, str)
    vault_id, path = where if where else (None, None)
    return OutsideFile(fid, session_id, at, tool, str(named), vault_id, path, digest)


def files_for_session(conn: apsw.Connection, session_id: str) -> list[OutsideFile]:
    """Every file the session changed outside kms, oldest first."""
    return [
        OutsideFile(**r)
        for r in rows(conn, "SELECT * FROM session_files WHERE session_id = ? ORDER BY id", (session_id,))
    ]


def files_for_path(conn: apsw.Connection, vault_id: int, path: str, *, since: float | None = None) -> list[OutsideFile]:
    """Every change an agent session made to one vault path outside kms (oldest first): who to attribute a
    change of the note that kms did not write to."""
    return [
        OutsideFile(**r)
        for r in rows(
            conn,
            "SELECT * FROM session_files WHERE vault_id = ? AND path = ? AND at >= ? ORDER BY at, id",
            (vault_id, path, since or 0.0),
        )
    ]
