"""The one provenance row of a write call: an agent's, through the write guard (``server.writes.guard``), or
a person's revert or trash (``server.writes.undo.revert``, ``server.writes.undo.trash``)."""

from __future__ import annotations

from typing import Any

import apsw

from server.activity import provenance
from server.errors import KmsError
from server.store.health import UNUSABLE, database_error
from server.writes.context import Touched
from server.writes.outcome import WriteOutcome


def text_argument(value: Any, limit: int = 1000) -> str | None:
    """A string argument worth naming in the provenance row (not whatever an agent sent)."""
    return value if isinstance(value, str) and len(value) <= limit else None


def record_call(
    conn: apsw.Connection,
    *,
    tool: str,
    session_id: str,
    input_summary: str,
    touched: Touched,
    outcome: WriteOutcome | None,
    failure: BaseException | None,
    actor: str = "agent",
    message: str | None = None,
    reverts_id: int | None = None,
    idempotency_key: str | None = None,
    answer: str | None = None,
) -> int:
    """The one provenance row of a write call (an agent's through the guard, a person's revert). A row with
    neither an outcome nor a failure is a retry answered from an earlier call (``idempotency``)."""
    common: dict[str, Any] = {
        "tool": tool,
        "session_id": session_id,
        "input_summary": input_summary,
        "actor": actor,
        "reverts_id": reverts_id,
        "note_id": touched.note_id,
    }
    if outcome is None and failure is None:  # a retry answered from its first call: nothing written
        return provenance.record(
            conn,
            **common,
            status="success",
            vault=touched.vault,
            path=touched.path,
            title=touched.title,
            message=message,
        )
    if outcome is None:
        if isinstance(failure, (KmsError, *UNUSABLE)):
            err = failure if isinstance(failure, KmsError) else database_error(failure, conn.filename)
            kind, text = err.kind, err.message
            path = touched.path or text_argument(err.extra.get("path"))
        else:  # a bug: recorded too, then the caller answers "internal"
            kind, path, text = "internal", touched.path, f"{type(failure).__name__}: {failure}"[:1000]
        return provenance.record(
            conn,
            **common,
            status=provenance.status_for(kind),
            vault=touched.vault,
            path=path,
            title=touched.title,
            error=kind,
            message=text,
        )
    result = outcome.result
    common["note_id"] = result.get("noteId") or touched.note_id
    return provenance.record(
        conn,
        **common,
        status="success",
        vault=result.get("vault"),
        path=result.get("path"),
        title=result.get("title"),
        message=message or result.get("indexWarning"),
        lines_added=result.get("linesAdded", 0),
        bytes_before=result.get("bytesBefore"),
        bytes_after=result.get("bytesAfter"),
        change=outcome.change,
        hash_before=outcome.hash_before,
        hash_after=outcome.hash_after,
        idempotency_key=idempotency_key,
        answer=answer,
    )
