"""The person's answer to a conflict (``server.index.conflicts``): keep mine, keep theirs, or keep both.

One core function for every front end (``kms conflicts resolve``, the dashboard): ``resolve_conflict``.

- **mine**: the note stays as it is; a conflict copy goes to the vault's ``.trash/`` (never deleted: ``kms
  trash`` lists it).
- **theirs**: the note becomes the other side (the copy's bytes, or a git merge's ``theirs``), written as the
  person's change (``person.person_write``, one provenance row, tool ``conflict-resolve``), so ``kms
  revert`` takes it back; the copy then goes to the trash.
- **both**: the other side becomes a note of its own beside the note, named ``<note> (conflict <date>).md``
  (a name no sync tool's pattern takes for a copy), created as the person's change; the copy goes to the trash.

The conflict is then marked resolved with what was kept. A copy or note that changed on disk while this ran
makes a ``conflict`` error and changes nothing (the compare-and-swap of ``multifile.apply_plans``).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import apsw

from server.activity.changes import FilesChanged
from server.activity.note_history import unified
from server.errors import KmsError
from server.index import conflicts
from server.vault.files import fsync_dir, sha256_hex
from server.vault.paths import NOTE_SUFFIX, TRASH, strip_note_suffix
from server.vault.registry import Vault, get_vault
from server.writes.context import Touched
from server.writes.outcome import WriteOutcome, WriteResult
from server.writes.person import person_write
from server.writes.unit_files import FilePlan

KEEP = ("mine", "theirs", "both")
TOOL = "conflict-resolve"


def view(conn: apsw.Connection, conflict_id: int) -> dict[str, Any]:
    """One conflict as a person reads it: where, which tool, when, and the diff from the note (mine) to the
    other side (theirs)."""
    row = conflicts.get(conn, conflict_id)
    vault = get_vault(conn, row["vault_id"])
    mine, theirs = conflicts.sides(vault, row)
    return {
        "id": row["id"],
        "vault": vault.name,
        "path": row["path"],
        "copyPath": row["copy_path"],
        "source": row["source"],
        "openedAt": row["opened_at"],
        "resolvedAt": row["resolved_at"],
        "resolution": row["resolution"],
        "mineExists": mine is not None,
        "theirsExists": theirs is not None,
        "diff": unified(mine or b"", theirs or b"", (row["path"], "mine"), (row["copy_path"] or row["path"], "theirs")),
    }


def listing(conn: apsw.Connection, vault: str | None = None, *, diffs: bool = False) -> list[dict[str, Any]]:
    """The open conflicts (of one vault, or all), each as ``view`` gives it (the diff only with ``diffs``)."""
    vault_id = get_vault(conn, vault).id if vault is not None else None
    out = []
    for row in conflicts.open_conflicts(conn, vault_id):
        item = view(conn, row["id"])
        if not diffs:
            item.pop("diff")
        out.append(item)
    return out


def resolve_conflict(conn: apsw.Connection, conflict_id: int, keep: str) -> dict[str, Any]:
    """Resolve one open conflict as the person chose (``keep``: mine, theirs or both); what was done."""
    if keep not in KEEP:
        raise KmsError("invalid-input", f"keep {keep!r}? choose mine, theirs or both")
    row = conflicts.get(conn, conflict_id)
    if row["resolved_at"] is not None:
        raise KmsError("conflict", f"conflict {conflict_id} was resolved already ({row['resolution']})", id=conflict_id)
    vault = get_vault(conn, row["vault_id"])
    mine, theirs = conflicts.sides(vault, row)
    done: dict[str, Any] = {"id": conflict_id, "vault": vault.name, "path": row["path"], "kept": keep}
    if keep in ("theirs", "both"):
        if theirs is None:
            raise KmsError("conflict", f"the other side of conflict {conflict_id} is gone; keep mine", id=conflict_id)
        if keep == "theirs":
            done.update(_write_note(conn, vault, row, mine, theirs))
        else:
            done["newPath"] = _keep_both(conn, vault, row, theirs)
    if row["copy_path"] is not None:
        done["trashed"] = _trash(vault, row["copy_path"])
    conflicts.resolve(conn, conflict_id, keep)
    return done


def _write_note(conn: apsw.Connection, vault: Vault, row: dict, mine: bytes | None, theirs: bytes) -> dict[str, Any]:
    """The note becomes ``theirs``, as the person's recorded (revertible) change."""
    # deferred: the YAML editors only to resolve; the dashboard and kms conflicts list import this module
    from server.writes.multifile import apply_plans
    from server.writes.operations import create_exact

    path = row["path"]
    touched = Touched(None, vault.name, path, strip_note_suffix(path.rsplit("/", 1)[-1]))
    summary = f"keep theirs for {path} ({row['source']} conflict {row['id']})"
    with person_write(conn, tool=TOOL, summary=summary, touched=touched) as call:
        if mine is None:
            call.outcome = create_exact(call.ctx, vault, path, theirs)
        else:
            try:
                text = theirs.decode("utf-8")
            except UnicodeDecodeError as e:
                raise KmsError("invalid-input", "the other side is not UTF-8; kms will not write it") from e
            plan = FilePlan(path, lambda _t: text, expect_hash=sha256_hex(mine))
            files, _unit = apply_plans(call.ctx, vault, [plan])
            result = WriteResult(
                title=touched.title or path,
                path=path,
                vault=vault.name,
                bytesBefore=len(mine),
                bytesAfter=len(theirs),
                changed=bool(files),
            )
            call.outcome = WriteOutcome(
                result, FilesChanged(path, tuple(files)) if files else None, sha256_hex(mine), sha256_hex(theirs)
            )
        outcome = call.outcome

        def note_id() -> None:  # (a note created here has its id once indexed)
            found = conn.execute("SELECT id FROM notes WHERE vault_id = ? AND path = ?", (vault.id, path)).fetchone()
            touched.note_id = outcome.result.get("noteId") or (str(found[0]) if found else None)

        call.ctx.when_indexed(note_id)
    return {"invocationId": call.invocation_id}


def _keep_both(conn: apsw.Connection, vault: Vault, row: dict, theirs: bytes) -> str:
    """The other side as a note of its own beside the note; its path."""
    # deferred: the YAML editors only to resolve; the dashboard and kms conflicts list import this module
    from server.writes.operations import create_exact

    stem = strip_note_suffix(row["path"])
    day = time.strftime("%Y-%m-%d", time.localtime(row["opened_at"]))
    path = f"{stem} (conflict {day}){NOTE_SUFFIX}"
    n = 2
    while os.path.lexists(vault.root / path):
        path, n = f"{stem} (conflict {day} {n}){NOTE_SUFFIX}", n + 1
    touched = Touched(None, vault.name, path, None)
    summary = f"keep both for {row['path']} ({row['source']} conflict {row['id']}): {path}"
    with person_write(conn, tool=TOOL, summary=summary, touched=touched) as call:
        call.outcome = create_exact(call.ctx, vault, path, theirs)
        outcome = call.outcome

        def note_id() -> None:
            touched.note_id = outcome.result.get("noteId")

        call.ctx.when_indexed(note_id)
    return path


def _trash(vault: Vault, relpath: str) -> str | None:
    """Move a conflict copy into the vault's ``.trash/`` at its own path (numbered if one is there); where it
    went, None if it was gone already."""
    source = vault.root / relpath
    if not os.path.lexists(source):
        return None
    target = f"{TRASH}/{relpath}"
    n = 2
    while os.path.lexists(vault.root / target):
        target, n = f"{TRASH}/{relpath} {n}", n + 1
    dest: Path = vault.root / target
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, dest)
    with contextlib.suppress(OSError):
        fsync_dir(dest.parent)
        fsync_dir(source.parent)
    return target
