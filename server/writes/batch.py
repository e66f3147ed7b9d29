"""``kms_create_many``: up to ``write.max_files_per_call`` new notes in one call, best effort.

Each note is created exactly as ``kms_create`` would (``operations.create``) and takes its own
rate-limit slot, so a batch is never a way around the limits; a note that fails (exists
already, a denied folder, the limit reached) is reported with its error kind and the others
still go ahead. The call is one provenance row whose ``FilesChanged`` lists every note it
created, so a revert deletes them as one unit (only while each is still what was written).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from server.activity.changes import FileChange, FileCreated, FilesChanged
from server.errors import KmsError
from server.vault.registry import Vault
from server.writes.context import WriteContext
from server.writes.operations import create
from server.writes.outcome import WriteOutcome, WriteResult


def create_many(ctx: WriteContext, vault: Vault, notes: list[dict[str, Any]]) -> WriteOutcome:
    """Create each of ``notes`` (title, content, tags, folder), each with a rate-limit slot of its own."""
    ctx.check_breadth(len(notes), "notes")
    results: list[dict[str, Any]] = []
    files: list[FileChange] = []
    bytes_after = 0
    own_slot = True  # the call's own slot (taken by the guard) is the first note written
    for spec in notes:
        release: Callable[[], None] | None = None
        try:
            if not own_slot:
                release = ctx.take_slot()
            out = create(
                ctx,
                vault,
                title=spec["title"],
                content=spec.get("content") or "",
                tags=spec.get("tags"),
                folder=spec.get("folder"),
            )
        except KmsError as e:
            if release is not None:
                release()
            results.append(
                {
                    "title": spec["title"],
                    "error": e.kind,
                    "message": e.message,
                    **{k: e.extra[k] for k in ("retryAfterMs", "wouldAllow") if k in e.extra},
                }
            )
            continue
        own_slot = False
        made = out.change
        assert isinstance(made, FileCreated)
        files.append(FileChange(made.path, None, 0, "", made.text, "", made.hash))
        bytes_after += out.result.get("bytesAfter", 0)
        entry = {"title": spec["title"], "ok": True, "noteId": out.result.get("noteId"), "path": made.path}
        ctx.when_indexed(partial(_note_id, entry, out.result))  # (the index gives the id: ``reindex``)
        results.append(entry)
    created = [r for r in results if r.get("ok")]
    result = WriteResult(
        noteId=created[0]["noteId"] if created else None,
        title=created[0]["title"] if created else "",
        path=files[0].path if files else "",
        vault=vault.name,
        bytesBefore=0,
        bytesAfter=bytes_after,
        linesAdded=0,
        changed=bool(files),
    )
    result["results"], result["created"], result["failed"] = results, len(created), len(results) - len(created)
    if created:
        ctx.when_indexed(partial(_note_id, result, created[0]))
    return WriteOutcome(result, FilesChanged(result["path"], tuple(files)) if files else None)


def _note_id(into: Any, source: Mapping[str, Any]) -> None:
    """A created note's id, once the index gave it (``WriteContext.when_indexed``)."""
    into["noteId"] = source.get("noteId")
