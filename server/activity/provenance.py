"""Provenance of write-tool calls: one ``tool_invocations`` row per call, success or not.

The row is what the dashboard shows and what ``server.writes.undo.revert`` undoes, so for a
success it records the typed change (``server.activity.changes``): its kind in
``change_kind`` and exactly what was inserted where (``inserted_text`` at character
``insert_offset`` of the new file text, BOM excluded) or the old and new values of exactly
the keys changed. Rows are never updated; the FTS table ``tool_invocations_fts`` is
filled by an insert trigger.
"""

from __future__ import annotations

import json
import time
from typing import Any

import apsw

from server.activity.changes import Change, FileChange, FilesChanged, columns
from server.store.db import rows, write_tx

SUMMARY_MAX = 400
FIELD_MAX = 80

STATUS_FOR_KIND = {
    "conflict": "conflict",
    "rate-limited": "rate-limited",
    "folder-denied": "folder-denied",
    # the person's settings or decisions refused the call: one status, told apart by its kind (a tier
    # refusal read as "✗ error" beside a folder refusal's "⊘ denied")
    **dict.fromkeys(("feature-disabled", "paused", "revoked", "rejected", "too-broad", "approval-timeout"), "refused"),
}

# status -> (symbol, word): one mark for each row status, wherever a call is listed (kms log, the dashboard)
STATUS_MARKS: dict[str, tuple[str, str]] = {
    "success": ("✓", "ok"),
    "error": ("✗", "error"),
    "conflict": ("≠", "conflict"),
    "rate-limited": ("◷", "limited"),
    "folder-denied": ("⊘", "refused"),
    "refused": ("⊘", "refused"),
}


def status_for(kind: str | None) -> str:
    """The row status for an error kind (``error`` unless the dashboard shows it separately)."""
    return "success" if kind is None else STATUS_FOR_KIND.get(kind, "error")


def _short(value: Any) -> str:
    if isinstance(value, str):
        if len(value) > FIELD_MAX:
            return json.dumps(value[:FIELD_MAX], ensure_ascii=False) + f"…({len(value)} chars)"
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        inner = ", ".join(_short(v) for v in list(value)[:10])
        more = f", …+{len(value) - 10}" if len(value) > 10 else ""
        return f"[{inner}{more}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in list(value.items())[:10]) + "}"
    return json.dumps(value, default=str)


def summarize_input(args: dict[str, Any], limit: int = SUMMARY_MAX) -> str:
    """A short, human-readable one-liner of the call's arguments (long text truncated)."""
    text = " ".join(f"{k}={_short(v)}" for k, v in args.items() if v is not None)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def record(
    conn: apsw.Connection,
    *,
    tool: str,
    session_id: str,
    status: str,
    input_summary: str = "",
    actor: str = "agent",
    note_id: str | None = None,
    vault: str | None = None,
    path: str | None = None,
    title: str | None = None,
    error: str | None = None,
    message: str | None = None,
    lines_added: int = 0,
    bytes_before: int | None = None,
    bytes_after: int | None = None,
    change: Change | None = None,
    hash_before: str | None = None,
    hash_after: str | None = None,
    reverts_id: int | None = None,
    at: float | None = None,
    idempotency_key: str | None = None,
    answer: str | None = None,
) -> int:
    """Insert one invocation row and return its id (``idempotency_key`` and ``answer``: a keyed call's,
    for its retries: ``server.activity.idempotency``)."""
    payload = columns(change)
    with write_tx(conn):
        conn.execute(
            """
            INSERT INTO tool_invocations(at, session_id, actor, tool, note_id, vault, path, title,
                input_summary, status, error, message, lines_added, bytes_before, bytes_after,
                inserted_text, insert_offset, props_before, props_after, hash_before, hash_after, reverts_id,
                change_kind, idempotency_key, answer)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            (
                at if at is not None else time.time(),
                session_id,
                actor,
                tool,
                note_id,
                vault,
                path,
                title,
                input_summary,
                status,
                error,
                message,
                lines_added,
                bytes_before,
                bytes_after,
                payload.get("inserted_text"),
                payload.get("insert_offset"),
                _json(payload.get("props_before")),
                _json(payload.get("props_after")),
                hash_before,
                hash_after,
                reverts_id,
                payload.get("change_kind"),
                idempotency_key,
                answer,
            ),
        )
        rid = conn.last_insert_rowid()
        if isinstance(change, FilesChanged):
            conn.executemany(
                "INSERT INTO tool_file_changes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (rid, i, f.path, f.new_path, f.offset, f.old, f.new, f.hash_before, f.hash_after, int(f.hidden))
                    for i, f in enumerate(change.files)
                ],
            )
        return rid


def file_changes(conn: apsw.Connection, invocation_id: int) -> list[FileChange]:
    """The per-file changes of one invocation, in the order they were made."""
    return [
        FileChange(
            r["path"],
            r["new_path"],
            r["hunk_offset"],
            r["old_text"],
            r["new_text"],
            r["hash_before"],
            r["hash_after"],
            bool(r["hidden"]),
        )
        for r in rows(conn, "SELECT * FROM tool_file_changes WHERE invocation_id = ? ORDER BY seq", (invocation_id,))
    ]


# "reverted by" through the m005 partial index on reverts_id: one index probe per row
_COLUMNS = """
    t.*,
    (SELECT r.id FROM tool_invocations r
      WHERE r.reverts_id = t.id AND r.status = 'success' ORDER BY r.id LIMIT 1) AS reverted_by
"""


def _decode(row: dict) -> dict:
    for key in ("props_before", "props_after"):
        if row.get(key) is not None:
            row[key] = json.loads(row[key])
    return row


def get_invocation(conn: apsw.Connection, invocation_id: int) -> dict | None:
    """One row (props decoded, ``reverted_by`` = id of a successful revert of it, if any)."""
    found = rows(conn, f"SELECT {_COLUMNS} FROM tool_invocations t WHERE t.id = ?", (invocation_id,))
    if not found:
        return None
    inv = _decode(found[0])
    if inv.get("change_kind") == "files-changed":
        inv["files"] = file_changes(conn, invocation_id)
    return inv


def list_invocations(
    conn: apsw.Connection,
    session: str | None = None,
    limit: int = 50,
    since_id: int | None = None,
    tool: str | None = None,
    status: str | None = None,
) -> list[dict]:
    """Recent invocations, newest first; with ``since_id`` the rows after it, oldest first.

    The two orders serve two uses: a list view wants the newest; a live tail polls
    with the last id it has seen and must not skip rows when more than ``limit``
    arrived, so it pages forward.
    """
    where: list[str] = []
    params: list[Any] = []
    if session is not None:
        where.append("t.session_id = ?")
        params.append(session)
    if tool is not None:
        where.append("t.tool = ?")
        params.append(tool)
    if status is not None:
        where.append("t.status = ?")
        params.append(status)
    if since_id is not None:
        where.append("t.id > ?")
        params.append(since_id)
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    order = "ASC" if since_id is not None else "DESC"
    params.append(max(1, int(limit)))
    sql = f"SELECT {_COLUMNS} FROM tool_invocations t {clause} ORDER BY t.id {order} LIMIT ?"
    return [_decode(r) for r in rows(conn, sql, tuple(params))]


def fts_query(query: str) -> str:
    """Every word as a quoted FTS5 string (AND-ed), so user text can't be an FTS syntax error; the
    dashboard's feed search quotes by this same rule."""
    words = [w for w in query.split() if w]
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def search_invocations(conn: apsw.Connection, query: str, limit: int = 20, vault: str | None = None) -> list[dict]:
    """Full-text search over tool, title, input summary, inserted text and message (best first); ``vault``:
    only the calls on that vault's notes (``kms search --vault`` listed every vault's)."""
    q = fts_query(query)
    if not q:
        return []
    sql = f"""
        SELECT {_COLUMNS} FROM tool_invocations_fts f
        JOIN tool_invocations t ON t.id = f.rowid
        WHERE tool_invocations_fts MATCH ? AND (? IS NULL OR t.vault = ?)
        ORDER BY bm25(tool_invocations_fts), t.id DESC
        LIMIT ?
    """
    return [_decode(r) for r in rows(conn, sql, (q, vault, vault, max(1, int(limit))))]


def write_totals(conn: apsw.Connection) -> dict[str, Any]:
    """What agents have written so far (``kms doctor``): calls, how many succeeded, sessions, the last one."""
    calls, ok, sessions, last = next(
        conn.execute(
            "SELECT count(*), coalesce(sum(status = 'success'), 0), count(DISTINCT session_id), max(at) "
            "FROM tool_invocations WHERE actor = 'agent'"
        )
    )
    return {
        "calls": int(calls),
        "succeeded": int(ok),
        "refused": int(calls) - int(ok),
        "sessions": int(sessions),
        "lastAt": last,
    }
