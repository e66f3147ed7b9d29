"""Preview and revert a ``FilesChanged`` (an edit, a move, a rename with its links, a trash) as one unit.

A revert rebuilds every touched file exactly as it was (``FileChange.undo``) and moves it
back, only while every file is still exactly what the change left (its recorded hash):
otherwise it names the file that changed and reverts nothing. The preview shows the same
answer and a diff per file, for the dashboard's confirmation and ``kms revert``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from server.activity.changes import FileChange, FilesChanged
from server.vault.files import decode, sha256_hex
from server.vault.paths import locate_note
from server.vault.registry import Vault
from server.writes import reindex
from server.writes.context import WriteContext
from server.writes.multifile import apply_plans
from server.writes.outcome import WriteOutcome, WriteResult
from server.writes.unit_files import FilePlan


def _state(vault: Vault, f: FileChange) -> tuple[str | None, str | None]:
    """(problem or None, the file's current text when it is exactly what the change left)."""
    try:
        raw = locate_note(vault.root, f.now_path)[0].read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return f"{f.now_path} is gone", None
    except Exception as e:  # noqa: BLE001 - a path that no longer resolves safely: refuse, say why
        return f"{f.now_path}: {e}", None
    if sha256_hex(raw) != f.hash_after:
        return f"{f.now_path} was edited since", None
    if f.new_path and (vault.root / f.path).exists():
        return f"{f.path} exists again (another note took its place)", None
    return None, decode(raw)[0]


def diff_text(before: str, after: str, path: str, new_path: str | None = None) -> str:
    """A unified diff of one file, as the dashboard and ``kms revert`` show it."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=path, tofile=new_path or path, n=2
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def preview(vault: Vault, change: FilesChanged) -> dict[str, Any]:
    """Whether the change can be reverted now, and what each file would go back to."""
    files: list[dict[str, Any]] = []
    problems: list[str] = []
    for f in change.files:
        problem, text = _state(vault, f)
        if problem:
            problems.append(problem)
        after = text if text is not None else None
        diff = (
            diff_text(f.undo(after), after, f.path, f.new_path)
            if after is not None
            else diff_text(f.old, f.new, f.path, f.new_path)
        )
        files.append(
            {
                "path": f.path,
                "newPath": f.new_path,
                "ok": problem is None,
                "problem": problem,
                "diff": diff,
                "hidden": f.hidden,
            }
        )
    reason = (
        None
        if not problems
        else "; ".join(problems[:5])
        + ("; …" if len(problems) > 5 else "")
        + ": not reverting over a newer edit (nothing will be changed)"
    )
    return {"action": "restore-files", "canRevert": not problems, "reason": reason, "files": files}


def revert(ctx: WriteContext, vault: Vault, change: FilesChanged, note_id: str | None) -> WriteOutcome:
    """Put every file back as it was, all or nothing (``conflict`` naming a file that changed)."""
    plans = [
        FilePlan(
            f.now_path,
            f.undo,
            new_path=f.path if f.new_path else None,
            hidden=f.hidden,
            expect_hash=f.hash_after,
            delete=not f.hash_before,
        )
        for f in change.files
    ]
    home = change.files[0].path if change.files else change.path  # the note the call was about comes first
    done, unit = apply_plans(ctx, vault, plans, keep_ids={home: note_id} if note_id else None)
    result = WriteResult(
        noteId=note_id,
        title=Path(home).stem,
        path=home,
        vault=vault.name,
        bytesBefore=0,
        bytesAfter=0,
        linesAdded=0,
        changed=bool(done),
    )
    reindex.warn_into(ctx, unit, result)
    return WriteOutcome(result, FilesChanged(change.path, tuple(done)))
