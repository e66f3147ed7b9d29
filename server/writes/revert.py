"""Take back one successful agent write, touching nothing else in the note.

The provenance row says exactly what the write did, so a revert can undo exactly
that: remove ``inserted_text`` at ``insert_offset`` (or, if the note changed around
it, at its one exact occurrence), restore the frontmatter values it replaced (only
while the keys still hold the values it set), or delete a note it created (only
while the file is still exactly what it wrote). Whenever that can't be done
unambiguously the revert is refused with a reason; a revert never guesses.

``preview_revert`` computes the same plan without writing, for the dashboard's
confirmation dialog. A revert is itself recorded (actor ``person``, ``reverts_id``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from server.activity import provenance
from server.errors import KmsError
from server.store.db import rows
from server.store.locks import file_lock
from server.vault import frontmatter
from server.vault.files import decode, detect_newline, fsync_dir, sha256_hex
from server.vault.paths import resolve_note_file
from server.vault.registry import Vault, get_vault
from server.writes.operations import Edit, NoteRef, WriteOutcome, line_count, lock_dir_for, write_note

TOOL_REVERT = "revert"
_TEXT_TOOLS = ("kms_append", "kms_insert_at")


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
    if inv["reverts_id"] is not None or inv["tool"] == TOOL_REVERT:
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


def _occurrences(text: str, needle: str) -> list[int]:
    out, i = [], text.find(needle)
    while i >= 0:
        out.append(i)
        i = text.find(needle, i + 1)
    return out


def plan_revert(inv: dict, text: str, current_hash: str) -> Plan:
    """Compute the revert of ``inv`` against the note's current text (no I/O)."""
    tool = inv["tool"]
    if tool == "kms_create":
        if current_hash != inv["hash_after"]:
            return Plan("delete-note", False, "the note was edited after it was created; delete it yourself if wanted")
        return Plan("delete-note", True, remove_text=text, offset=0, new_text=None)
    if tool in _TEXT_TOOLS:
        return _plan_text(inv, text)
    if tool == "kms_update_properties":
        return _plan_props(inv, text)
    return Plan("none", False, f"{tool} can't be reverted")


def _plan_text(inv: dict, text: str) -> Plan:
    ins: str | None = inv["inserted_text"]
    off: int | None = inv["insert_offset"]
    if not ins or off is None:
        return Plan("remove-text", False, "the invocation recorded no inserted text")
    def whole(pos: int) -> bool:
        """Does the occurrence still sit on the line boundaries it was written at? Otherwise a person
        extended the inserted text ("agent line" -> "agent line, edited") and removing it would splice
        their words onto another line. Appends end at a line end; insert_at text starts a line."""
        end = pos + len(ins)
        right = ins.endswith("\n") or end == len(text) or text[end] in "\r\n"
        left = inv["tool"] == "kms_append" or ins.startswith(("\n", "\r\n")) or pos == 0 or text[pos - 1] == "\n"
        return right and left

    if text[off : off + len(ins)] == ins and whole(off):
        pos = off
    else:
        hits = [h for h in _occurrences(text, ins) if whole(h)]
        if not hits:
            return Plan("remove-text", False, "the inserted text is no longer in the note (it was edited since)")
        if len(hits) > 1:
            return Plan(
                "remove-text", False,
                f"the note moved around the inserted text and it now occurs {len(hits)} times; can't tell which",
            )
        pos = hits[0]
    return Plan("remove-text", True, offset=pos, remove_text=ins, new_text=text[:pos] + text[pos + len(ins) :])


def _plan_props(inv: dict, text: str) -> Plan:
    before: dict[str, Any] = inv["props_before"] or {}
    after: dict[str, Any] = inv["props_after"] or {}
    if not after:
        return Plan("restore-properties", False, "the invocation changed no properties")
    try:
        span = frontmatter.frontmatter_span(text)
        current, _py = frontmatter.load_both(text[span.open_end : span.close_start] if span else "")
    except (frontmatter.Unclosed, KmsError):
        return Plan("restore-properties", False, "the note's frontmatter no longer parses")
    changed = []
    restore: dict[str, Any] = {}
    for key, value in after.items():
        now = frontmatter.ABSENT if key not in current else frontmatter.to_json(current[key])
        if frontmatter.canon(now) != frontmatter.canon(value):
            changed.append(key)
        restore[key] = {"from": now, "to": before.get(key, frontmatter.ABSENT)}
    if changed:
        return Plan(
            "restore-properties", False,
            f"properties changed since: {', '.join(changed)}; not reverting over a newer edit", restore=restore,
        )
    created: str | None = inv["inserted_text"]
    if created and inv["insert_offset"] == 0 and text.startswith(created):
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


def revert(
    conn: apsw.Connection, invocation_id: int, session_id: str = "person", *, lock_dir: Path | None = None
) -> dict[str, Any]:
    """Undo one successful write; records a provenance row (actor ``person``) either way."""
    ctx: dict[str, Any] = {}
    try:
        inv = _invocation(conn, invocation_id)
        ctx.update(note_id=inv["note_id"], vault=inv["vault"], path=inv["path"], title=inv["title"], tool=inv["tool"])
        vault, note = _target(conn, inv)
        ctx.update(note_id=note.id or inv["note_id"], path=note.path)
        if inv["tool"] == "kms_create":
            outcome = _delete_created(conn, vault, note, inv, lock_dir)
        else:
            holder: dict[str, Plan] = {}

            def compute(text: str, _fmt: Any) -> Edit:
                plan = plan_revert(inv, text, "")
                if not plan.ok or plan.new_text is None:
                    raise KmsError("conflict", f"can't revert #{invocation_id}: {plan.reason}", reason=plan.reason)
                holder["plan"] = plan
                return Edit(plan.new_text)

            outcome = write_note(conn, vault, note, compute, lock_dir=lock_dir)
            plan = holder["plan"]
            if plan.action == "restore-properties":
                outcome.props_before = {k: v["from"] for k, v in plan.restore.items()}
                outcome.props_after = {k: v["to"] for k, v in plan.restore.items()}
            ctx["message"] = (
                f"removed {len(plan.remove_text or '')} characters at offset {plan.offset}"
                if plan.action == "remove-text" else "restored properties"
            )
    except KmsError as e:
        provenance.record(
            conn, tool=TOOL_REVERT, session_id=session_id, actor="person", status=provenance.status_for(e.kind),
            input_summary=f"revert #{invocation_id} ({ctx.get('tool', '?')})", note_id=ctx.get("note_id"),
            vault=ctx.get("vault"), path=ctx.get("path"), title=ctx.get("title"), error=e.kind, message=e.message,
            reverts_id=invocation_id,
        )
        raise
    result = outcome.result
    rid = provenance.record(
        conn, tool=TOOL_REVERT, session_id=session_id, actor="person", status="success",
        input_summary=f"revert #{invocation_id} ({inv['tool']})", note_id=ctx.get("note_id"),
        vault=result.get("vault"), path=result.get("path"), title=result.get("title"),
        message=ctx.get("message") or result.get("indexWarning"), lines_added=result.get("linesAdded", 0),
        bytes_before=result.get("bytesBefore"), bytes_after=result.get("bytesAfter"),
        props_before=outcome.props_before, props_after=outcome.props_after,
        hash_before=outcome.hash_before, hash_after=outcome.hash_after, reverts_id=invocation_id,
    )
    return {**result, "invocationId": rid, "reverted": invocation_id}


def _delete_created(
    conn: apsw.Connection, vault: Vault, note: NoteRef, inv: dict, lock_dir: Path | None
) -> WriteOutcome:
    """Delete a note kms created, only while it is byte-for-byte what the agent wrote."""
    from server.index.indexer import reindex_file

    real = resolve_note_file(vault.root, note.path)
    with file_lock(real, lock_dir or lock_dir_for(conn)):
        try:
            raw = real.read_bytes()
        except FileNotFoundError as e:
            raise KmsError("not-found", f"the note {note.path!r} no longer exists") from e
        text, _fmt = decode(raw)
        plan = plan_revert(inv, text, sha256_hex(raw))
        if not plan.ok:
            raise KmsError("conflict", f"can't revert #{inv['id']}: {plan.reason}", reason=plan.reason)
        os.unlink(real)
        with contextlib.suppress(OSError):
            fsync_dir(real.parent)
    result: dict[str, Any] = {
        "title": note.title, "path": note.path, "vault": vault.name, "bytesBefore": len(raw), "bytesAfter": 0,
        "linesAdded": -line_count(text), "changed": True, "noteId": None,
    }
    try:
        reindex_file(conn, vault, note.path)
    except Exception as e:  # noqa: BLE001 - the file is gone either way; the watcher heals the index
        result["indexWarning"] = f"deleted, but the index update failed: {e}"
    return WriteOutcome(result=result, hash_before=sha256_hex(raw), hash_after=None)  # type: ignore[arg-type]
