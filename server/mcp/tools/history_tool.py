"""``kms_history``: the versions kms kept of a visible note, who made each and how, and a diff between two.

The rules are ``server.activity.note_history``'s; this is the read tier's adapter. A hidden or out-of-scope note
is as if absent (``note_id_of``), and no version seen while the note was hidden is told or diffed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from server.activity import note_history
from server.errors import KmsError
from server.index import listing
from server.mcp.tools.base import PAYLOAD_CAP_BYTES, READ_ONLY, ReadSpec, StrictInput, ToolContext, ToolOutput
from server.mcp.tools.notes_tools import NoteIdField, note_id_of

MAX_DIFF_BYTES = PAYLOAD_CAP_BYTES - 16_384  # the versions list and the envelope keep the rest


class HistoryInput(StrictInput):
    noteId: str = NoteIdField
    limit: int = Field(default=20, ge=1, le=100, description="How many versions, newest first.")
    cursor: str | None = Field(default=None, max_length=500, description="nextCursor from the previous page.")
    diffFrom: int | None = Field(default=None, ge=1, description="Also diff this version number ...")
    diffTo: int | None = Field(default=None, ge=1, description="... to this one (default: the newest version).")


class VersionWho(BaseModel):
    by: str  # agent, person, or outside kms
    how: str  # the tool, or outside kms
    sessionId: str | None
    invocationId: int | None


class Version(BaseModel):
    version: int
    at: float
    path: str
    size: int
    sizeChange: int
    how: str  # who saw it: kms (its own write), watch, index; moved and deleted entries have no text
    who: VersionWho


class HistoryOutput(ToolOutput):
    noteId: str
    versions: list[Version]
    nextCursor: str | None
    diff: str | None = None
    diffTruncated: bool = False


def kms_history(ctx: ToolContext, args: HistoryInput) -> dict[str, Any]:
    ctx.require_index()
    note_id = note_id_of(ctx, args.noteId)
    conn = ctx.conn
    before = None
    if args.cursor:
        data = listing.decode_cursor(args.cursor)
        if data.get("n") != note_id or not isinstance(data.get("b"), int):
            raise KmsError("invalid-input", "cursor does not belong to this note; omit it to start from the newest")
        before = data["b"]
    try:
        line = note_history.find_line(conn, note_id)
    except KmsError as e:
        if e.kind != "not-found":
            raise
        return {"noteId": note_id, "versions": [], "nextCursor": None}
    rows = note_history.versions(conn, line, limit=args.limit + 1, before=before, agent=True)
    page = rows[: args.limit]
    out: dict[str, Any] = {
        "noteId": note_id,
        "versions": [
            {k: v[k] for k in ("version", "at", "path", "size", "sizeChange", "how")}
            | {"who": {k: v["who"][k] for k in ("by", "how", "sessionId", "invocationId")}}
            for v in page
        ],
        "nextCursor": listing.encode_cursor({"n": note_id, "b": page[-1]["version"]})
        if len(rows) > args.limit
        else None,
    }
    if args.diffFrom is not None:
        out.update(_diff(conn, line, args.diffFrom, args.diffTo))
    return out


def _diff(conn: Any, line: note_history.Line, a: int, b: int | None) -> dict[str, Any]:
    """The diff of two versions an agent may see (never one seen while the note was hidden)."""
    left = note_history.pick(conn, line, number=a)
    right = note_history.pick(conn, line, number=b) if b is not None else note_history.pick(conn, line)
    if left["hidden"] or right["hidden"]:
        raise KmsError("not-found", "no such version of this note")
    text = note_history.unified(
        note_history.version_bytes(conn, left),
        note_history.version_bytes(conn, right),
        (left["path"], f"version {left['version']}"),
        (right["path"], f"version {right['version']}"),
    )
    raw = text.encode()
    if len(raw) <= MAX_DIFF_BYTES:
        return {"diff": text, "diffTruncated": False}
    return {"diff": raw[:MAX_DIFF_BYTES].decode("utf-8", "ignore"), "diffTruncated": True}


KMS_HISTORY = ReadSpec(
    name="kms_history",
    about=(
        "The versions kms kept of one note, newest first: when, its size and size change, and who made each "
        "and how (by: agent, person or outside kms; the tool; the session). Pass diffFrom (and diffTo) for "
        "the unified diff between two versions. Use it to see how a note came to be, or what an earlier "
        "version said; pass nextCursor back for older versions."
    ),
    errors=("not-found", "invalid-input", "no-index"),
    input_model=HistoryInput,
    output_model=HistoryOutput,
    handler=kms_history,
    annotations=READ_ONLY.model_copy(update={"title": "Note history"}),
    cursor_field="cursor",
    example={"noteId": "drafts/edit.md"},
)
