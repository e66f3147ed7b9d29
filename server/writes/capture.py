"""The session note written through the write guard: by kms itself (actor ``capture``) when the host's hooks
say a session compacts or ends, and by the agent's ``kms_capture`` (its decisions, findings, next steps,
links). Both render the whole note from kms's records (``server.activity.session_note``) and write it in
``capture.folder`` (its own allowlist entry, as ``memory.folder`` is kms_remember's): created the first time,
rewritten in place after, so one session has one note, and ``kms revert`` takes back each version.

A note the person edited since kms last wrote it is left alone (``conflict``): kms never writes over a
person's text. A session that read, searched and wrote nothing gets no note, and a note that would not change
is not written again (no provenance row either).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import apsw
from pydantic import BaseModel, ConfigDict, Field

from server.activity import session_material
from server.activity.agent_session import AgentSession
from server.activity.changes import FilesChanged, file_change, whole_lines
from server.activity.ratelimit import Unmetered
from server.activity.session_note import NOTE_TOOL, SessionFacts, gather, note_title, render
from server.config.session_contract import SessionConfig
from server.config.tiers import Tier
from server.errors import KmsError
from server.store.db import rows, thread_connection
from server.vault.files import decode, encode, sha256_hex
from server.vault.paths import locate_note
from server.vault.registry import Vault, get_vault
from server.writes import appliers, own_writes
from server.writes.cas import write_note
from server.writes.context import NoteRef, WriteContext
from server.writes.guard import WriteService
from server.writes.operations import check_note_folder, create
from server.writes.outcome import Edit, WriteOutcome, WriteResult

TOOL = NOTE_TOOL  # the provenance rows of kms's own capture (actor ``capture``)


def _existing(conn: apsw.Connection, session_id: str) -> tuple[NoteRef, Vault, str | None] | None:
    """The session's note if kms wrote one and it is still indexed and visible (by its id: a rename keeps
    it)."""
    record = session_material.get(conn, session_id)
    if record is None or not record.note_id:
        return None
    found = rows(
        conn,
        "SELECT id, vault_id, path, title, folder, size_bytes FROM notes WHERE id = ? AND hidden_at IS NULL",
        (record.note_id,),
    )
    if not found:  # gone, or hidden now (a person moved it into a private folder): kms writes no more there
        return None
    r = found[0]
    note = NoteRef(r["id"], r["vault_id"], r["path"], r["title"], r["folder"], r["size_bytes"])
    return note, get_vault(conn, note.vault_id), record.note_hash


def _facts(conn: apsw.Connection, session_id: str, extra: Sequence[tuple[str, str]]) -> SessionFacts:
    facts = gather(conn, session_id)
    for kind, text in extra:
        facts.captures.setdefault(kind, []).append(text)
    return facts


def write_session_note(ctx: WriteContext, session_id: str, extra: Sequence[tuple[str, str]] = ()) -> WriteOutcome:
    """Create or rewrite ``session_id``'s note from its records (plus ``extra`` captured items, stored once
    the note is written)."""
    folder = ctx.capture_folder
    if not folder:
        raise KmsError(
            "feature-disabled",
            "session capture is off (capture.enabled, capture.folder); a person can turn it on with "
            "`kms config set capture.enabled true`",
        )
    conn = ctx.conn
    facts = _facts(conn, session_id, extra)
    text = render(facts)
    ctx = ctx.but(allowlist=ctx.allowlist.own_entry(folder))
    existing = _existing(conn, session_id)
    if existing is None:
        if facts.empty:
            return WriteOutcome(WriteResult(changed=False))

        outcome = create(ctx, ctx.home_vault(), title=note_title(facts), content=text, folder=folder)
    else:
        note, vault, written = existing

        check_note_folder(ctx, vault, note)  # moved out of the capture folder: left where it is
        seen: dict[str, str] = {}

        def compute(current: str, fmt: Any) -> Edit:
            if written is not None and sha256_hex(encode(current, fmt)) != written:
                raise KmsError(
                    "conflict",
                    "the session note was changed outside kms since kms wrote it; kms leaves it as it is",
                    noteId=note.id,
                )
            seen["before"] = current
            return Edit(text, None)

        outcome = write_note(ctx, vault, note, compute)
        if outcome.changed and outcome.hash_before and outcome.hash_after:
            change = file_change(note.path, seen["before"], text, outcome.hash_before, outcome.hash_after)
            outcome.change = FilesChanged(note.path, (whole_lines(change, seen["before"]),))
    result: Any = outcome.result
    if ctx.capture is None and outcome.changed and (digest := outcome.hash_after):

        def remember_note() -> None:  # once the index gave the note its id (``reindex``)
            if result.get("noteId"):
                session_material.set_note(
                    conn,
                    session_id,
                    note_id=result["noteId"],
                    vault=result["vault"],
                    path=result["path"],
                    digest=digest,
                )

        ctx.when_indexed(remember_note)
    if ctx.capture is None and extra:
        session_material.add_captures(conn, session_id, extra)
    return outcome


# ----------------------------------------------------------------------------- kms's own capture


class SessionNoteInput(BaseModel):
    """What a capture is asked for: the host event that asked (for the provenance row)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    event: str = Field(min_length=1, max_length=40)


@dataclass(frozen=True)
class SessionNoteTool:
    """kms's capture as the guard sees a tool (``guard.WriteTool``); not an MCP tool."""

    name: str = TOOL
    tier: Tier = "write"
    input_model: type[BaseModel] = SessionNoteInput
    handler: Callable[[WriteContext, Any], WriteOutcome] = lambda ctx, _args: write_session_note(ctx, ctx.session_id)


SESSION_NOTE = SessionNoteTool()
appliers.provide([SESSION_NOTE], actor="capture")  # a decision in any process writes a staged note (``review``)


def due(conn: apsw.Connection, session_id: str, folder: str | None) -> str | None:
    """Why no capture is due now (None: write): capture off, an empty session, or the note already says it."""
    if not folder:
        return "capture is off"
    record = session_material.get(conn, session_id)
    existing = _existing(conn, session_id)
    facts = gather(conn, session_id)
    if existing is None and record is not None and record.note_id:
        return "the session note is no longer where agents may see it (moved, hidden or deleted)"
    if existing is None:
        return "the session read, searched and wrote nothing" if facts.empty else None
    note, vault, written = existing

    try:
        real, _rel = locate_note(vault.root, note.path)
        raw = real.read_bytes()
    except (OSError, KmsError):
        return None  # the write says what is wrong
    if sha256_hex(raw) != written:
        return "the person changed the session note since kms wrote it"
    return "the session note is up to date" if raw == encode(render(facts), _format_of(raw)) else None


def _format_of(raw: bytes) -> Any:

    return decode(raw)[1]


# How long a staged session note waits for the person. No agent waits on it (write.approval_timeout is for
# an agent's call, which must answer): it expired with that timeout and the session's note was lost when
# nobody looked in time. It stays pending until decided, 30 days at most (a queue never grows for ever).
SESSION_NOTE_WAIT_S = 30 * 86_400


def _service(config: SessionConfig) -> tuple[Any, AgentSession]:
    """The guard for kms's own capture of ``config``'s session: write tier on (the note is kms's, not the
    agent's), no folder of the agent's allowlist, no write slot of the agent's; the session's scope,
    control state and ``write.approval`` as they are. Detached: a note the person must approve is staged and
    left to their decision, which writes it from whatever front end decides (``server.writes.review``): no
    process waits for it (a hook's detached process once did, for up to 30 days)."""

    own = dataclasses.replace(
        config,
        enabled=True,
        read_enabled=True,
        write_enabled=True,
        allowlist=(),
        token_folders=(),
        per_minute=0,
        approval_timeout=SESSION_NOTE_WAIT_S,
        review_detached=True,
    )
    session = AgentSession.open(own, limits=Unmetered())
    return WriteService(session, actor="capture"), session


def capture(config: SessionConfig, event: str) -> dict[str, Any]:
    """Write ``config``'s session note now through the guard as the ``capture`` actor. When the person must
    approve it, the staged call's ``pendingId`` is answered: their decision writes it (or not), wherever they
    make it (``kms approve``, the dashboard, the review page)."""

    if not own_writes.allowed(config.config_path):  # one machine of a synced vault writes these
        return {"written": False, "reason": own_writes.held_back()}
    folder = config.capture_folder if config.capture_enabled else None
    why = due(thread_connection(config.db_path), config.session_id, folder)
    if why is not None:
        return {"written": False, "reason": why}
    service, session = _service(config)
    args = {"event": event}
    try:
        staged = service.stage(SESSION_NOTE, args)
        if staged is None:
            result = service.run(SESSION_NOTE, args)
            return {"written": bool(result.get("changed", True)), **result}
        return {"written": False, "pendingId": staged.id, "reason": "waiting for the person's approval"}
    finally:
        session.close()
