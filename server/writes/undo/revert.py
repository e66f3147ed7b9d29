"""Take back one successful agent write, touching nothing else in the note.

The provenance row says exactly what the write did, so a revert can undo exactly
that: remove ``inserted_text`` at ``insert_offset`` (or, if the note changed around
it, at its one exact occurrence), restore the frontmatter values it replaced (only
while the keys still hold the values it set), or move a note it created to the trash
(only while the file is still exactly what it wrote). Whenever that can't be done
unambiguously the revert is refused with a reason; a revert never guesses.

What a write did is its typed change record (``server.activity.changes``), and whether
inserted text is still there is ``changes.locate``, the same answer the dashboard shows.
``preview_revert`` computes the same plan without writing, for the dashboard's
confirmation dialog. A revert is itself recorded, by ``server.writes.person.person_write``
(actor ``person``, ``reverts_id``), with the change it made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from server.activity import changes, provenance
from server.activity.changes import (
    FileCreated,
    FilesChanged,
    PropertiesChanged,
    TextInserted,
    TextRemoved,
)
from server.errors import KmsError
from server.store.db import rows
from server.vault import frontmatter
from server.vault.files import decode, detect_newline, sha256_hex
from server.vault.markdown import line_count
from server.vault.paths import TRASH, resolve_note_file, strip_note_suffix
from server.vault.registry import Vault, get_vault
from server.writes import reindex
from server.writes.cas import write_note
from server.writes.context import NoteRef, Touched, WriteContext
from server.writes.multifile import apply_plans
from server.writes.outcome import Edit, WriteOutcome, WriteResult
from server.writes.person import PersonCall, person_write
from server.writes.undo import revert_files
from server.writes.unit_files import FilePlan

TOOL_REVERT = "revert"


@dataclass
class Plan:
    """What reverting one invocation would do to the note's current text."""

    action: str  # remove-text | restore-properties | delete-note
    ok: bool
    reason: str | None = None
    offset: int | None = None  # where the text to remove starts now
    remove_text: str | None = None
    restore: dict[str, Any] = field(default_factory=dict)  # key -> {"from": now, "to": before}
    new_text: str | None = None


def _invocation(conn: apsw.Connection, invocation_id: int) -> dict:
    inv = provenance.get_invocation(conn, invocation_id)
    if inv is None:
        raise KmsError("not-found", f"no tool invocation #{invocation_id}")
    if inv["status"] != "success":
        raise KmsError("invalid-input", f"invocation #{invocation_id} did not succeed; there is nothing to revert")
    if inv["reverts_id"] is not None:
        raise KmsError("invalid-input", f"invocation #{invocation_id} is itself a revert")
    if inv["reverted_by"] is not None:
        raise KmsError("invalid-input", f"invocation #{invocation_id} was already reverted by #{inv['reverted_by']}")
    if inv["hash_after"] is not None and inv["hash_after"] == inv["hash_before"]:
        raise KmsError("invalid-input", f"invocation #{invocation_id} changed nothing")
    return inv


def _target(conn: apsw.Connection, inv: dict) -> tuple[Vault, NoteRef]:
    """Where the note is now: by note id (the index follows renames), else the recorded path."""
    if not inv["vault"]:
        raise KmsError("invalid-input", f"invocation #{inv['id']} names no vault")
    vault = get_vault(conn, inv["vault"])
    found = rows(
        conn,
        "SELECT id, path, title, folder, size_bytes FROM notes WHERE id = ? AND vault_id = ?",
        (inv["note_id"], vault.id),
    )
    if found:
        r = found[0]
        return vault, NoteRef(r["id"], vault.id, r["path"], r["title"], r["folder"], r["size_bytes"])
    path = inv["path"]
    if not path:
        raise KmsError("not-found", f"the note of invocation #{inv['id']} is no longer indexed")
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    return vault, NoteRef(inv["note_id"] or "", vault.id, path, inv["title"] or path, folder)


def plan_revert(inv: dict, text: str, current_hash: str) -> Plan:
    """Compute the revert of ``inv`` against the note's current text (no I/O), by the kind of change."""
    change = changes.from_row(inv)
    if isinstance(change, FileCreated):
        if current_hash != change.hash:
            return Plan("delete-note", False, "the note was edited after it was created; delete it yourself if wanted")
        return Plan("delete-note", True, remove_text=text, offset=0, new_text=None)
    if isinstance(change, TextInserted):
        where = changes.locate(change, text)
        if not where.intact or where.offset is None:
            return Plan("remove-text", False, where.explanation)
        pos, ins = where.offset, change.text
        return Plan("remove-text", True, offset=pos, remove_text=ins, new_text=text[:pos] + text[pos + len(ins) :])
    if isinstance(change, PropertiesChanged):
        return _plan_props(change, text)
    return Plan("none", False, f"a {inv.get('change_kind') or 'call that changed nothing'} can't be reverted")


def _plan_props(change: PropertiesChanged, text: str) -> Plan:
    before, after = change.before, change.after
    if not after:
        return Plan("restore-properties", False, "the invocation changed no properties")
    current = changes.props_now(text, after)
    if current is None:
        return Plan("restore-properties", False, "the note's frontmatter no longer parses")
    changed = []
    restore: dict[str, Any] = {}
    for key, value in after.items():
        now = current[key]
        if frontmatter.canon(now) != frontmatter.canon(value):
            changed.append(key)
        restore[key] = {"from": now, "to": before.get(key, frontmatter.ABSENT)}
    if changed:
        return Plan(
            "restore-properties",
            False,
            f"properties changed since: {', '.join(changed)}; not reverting over a newer edit",
            restore=restore,
        )
    created = change.created_block
    if created and text.startswith(created):
        new_text = text[len(created) :]  # the write created the whole frontmatter block: drop it again
    else:
        set_ = {k: frontmatter.from_json(v) for k, v in before.items() if v != frontmatter.ABSENT and k in after}
        remove = [k for k in after if before.get(k, frontmatter.ABSENT) == frontmatter.ABSENT]
        try:
            new_text = frontmatter.apply_props(text, set_, remove, newline=detect_newline(text)).new_text
        except KmsError as e:
            return Plan("restore-properties", False, e.message, restore=restore)
    return Plan("restore-properties", True, restore=restore, new_text=new_text)


def _read_current(vault: Vault, note: NoteRef) -> tuple[Path, bytes]:
    real = resolve_note_file(vault.root, note.path)
    try:
        return real, real.read_bytes()
    except FileNotFoundError as e:
        raise KmsError("not-found", f"the note {note.path!r} no longer exists") from e


def preview_revert(conn: apsw.Connection, invocation_id: int) -> dict[str, Any]:
    """What ``revert`` would do now (nothing is written). ``canRevert`` False comes with a ``reason``."""
    inv = _invocation(conn, invocation_id)
    change = changes.from_row(inv)
    if isinstance(change, FilesChanged):
        vault = get_vault(conn, inv["vault"])
        return {
            "invocationId": invocation_id,
            "tool": inv["tool"],
            "noteId": inv["note_id"],
            "vault": vault.name,
            "path": inv["path"],
            **revert_files.preview(vault, change),
        }
    vault, note = _target(conn, inv)
    _real, raw = _read_current(vault, note)
    text, _fmt = decode(raw)
    plan = plan_revert(inv, text, sha256_hex(raw))
    return {
        "invocationId": invocation_id,
        "tool": inv["tool"],
        "noteId": note.id,
        "vault": vault.name,
        "path": note.path,
        "action": plan.action,
        "canRevert": plan.ok,
        "reason": plan.reason,
        "removeText": plan.remove_text,
        "offset": plan.offset,
        "restore": plan.restore,
        "linesRemoved": (line_count(text) - line_count(plan.new_text or "")) if plan.ok else 0,
    }


def revert(conn: apsw.Connection, invocation_id: int, session_id: str = "person") -> dict[str, Any]:
    """Undo one successful write; records one provenance row (actor ``person``) either way. A revert the
    database cannot record (its disk full) changes no file: they are put back (``person.person_write``)."""
    with person_write(
        conn, tool=TOOL_REVERT, summary=f"revert #{invocation_id}", session_id=session_id, reverts_id=invocation_id
    ) as call:
        _revert(call, invocation_id)
    return {**call.result.result, "invocationId": call.invocation_id, "reverted": invocation_id}


def _revert(call: PersonCall, invocation_id: int) -> None:
    ctx = call.ctx
    conn = ctx.conn
    inv = _invocation(conn, invocation_id)
    call.summary = f"revert #{invocation_id} ({inv['tool']})"
    touched = call.touched = Touched(inv["note_id"], inv["vault"], inv["path"], inv["title"])
    change = changes.from_row(inv)
    if isinstance(change, FilesChanged):
        try:
            call.outcome = revert_files.revert(ctx, get_vault(conn, inv["vault"]), change, inv["note_id"])
        except KmsError as e:
            raise KmsError("conflict", f"can't revert #{invocation_id}: {e.message}", **e.extra) from None
        call.message = f"restored {len(change.files)} file(s)"
        return
    vault, note = _target(conn, inv)
    touched.note_id, touched.path = note.id or inv["note_id"], note.path
    if isinstance(change, FileCreated):
        call.outcome = _trash_created(ctx, vault, note, inv)
        return
    holder: dict[str, Plan] = {}

    def compute(text: str, _fmt: Any) -> Edit:
        plan = plan_revert(inv, text, "")
        if not plan.ok or plan.new_text is None:
            raise KmsError("conflict", f"can't revert #{invocation_id}: {plan.reason}", reason=plan.reason)
        holder["plan"] = plan
        if plan.action == "remove-text":
            return Edit(plan.new_text, TextRemoved(note.path, plan.offset or 0, plan.remove_text or ""))
        restored = PropertiesChanged(
            note.path,
            {k: v["from"] for k, v in plan.restore.items()},
            {k: v["to"] for k, v in plan.restore.items()},
        )
        return Edit(plan.new_text, restored)

    call.outcome = write_note(ctx, vault, note, compute)
    plan = holder["plan"]
    call.message = (
        f"removed {len(plan.remove_text or '')} characters at offset {plan.offset}"
        if plan.action == "remove-text"
        else "restored properties"
    )


def _trash_created(ctx: WriteContext, vault: Vault, note: NoteRef, inv: dict) -> WriteOutcome:
    """Move a note kms created into the vault's trash, only while it is byte-for-byte what the agent
    wrote: nothing is deleted for good but by ``kms trash empty``, so ``kms trash restore`` brings it back."""
    real = resolve_note_file(vault.root, note.path)
    try:
        raw = real.read_bytes()
    except FileNotFoundError as e:
        raise KmsError("not-found", f"the note {note.path!r} no longer exists") from e
    text, _fmt = decode(raw)
    plan = plan_revert(inv, text, sha256_hex(raw))
    if not plan.ok:
        raise KmsError("conflict", f"can't revert #{inv['id']}: {plan.reason}", reason=plan.reason)
    dest = free_trash_path(vault, f"{TRASH}/{note.path}")
    change = changes.from_row(inv)
    assert isinstance(change, FileCreated)
    try:  # the same check again under the unit's locks: a save that landed since is a conflict
        files, unit = apply_plans(
            ctx, vault, [FilePlan(note.path, lambda t: t, new_path=dest, expect_hash=change.hash)]
        )
    except KmsError as e:
        if e.kind != "conflict":
            raise
        reason = "the note was edited after it was created; delete it yourself if wanted"
        raise KmsError("conflict", f"can't revert #{inv['id']}: {reason}", reason=reason) from None
    result = WriteResult(
        title=note.title,
        path=note.path,
        vault=vault.name,
        bytesBefore=len(raw),
        bytesAfter=0,
        linesAdded=-line_count(text),
        changed=True,
        noteId=None,
    )
    reindex.warn_into(ctx, unit, result)
    return WriteOutcome(result, FilesChanged(note.path, tuple(files)))


def free_trash_path(vault: Vault, wanted: str) -> str:
    """``wanted``, or ``name 2.md``, ``name 3.md`` ... when an earlier note of that path is in the trash."""
    stem = strip_note_suffix(wanted)
    suffix = wanted[len(stem) :]  # the note's own suffix, in its own case
    candidate, n = wanted, 1
    while (vault.root / candidate).exists() or (vault.root / candidate).is_symlink():
        n += 1
        candidate = f"{stem} {n}{suffix}"
    return candidate
