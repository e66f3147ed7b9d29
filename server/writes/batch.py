"""``kms_create_many``: up to ``write.max_files_per_call`` new notes in one call, best effort.

Each note is created exactly as ``kms_create`` would (``operations.create``) and takes its own
rate-limit slot, so a batch is never a way around the limits; a note that fails (exists
already, a denied folder, the limit reached) is reported with its error kind and the others
still go ahead. The call is one provenance row whose ``FilesChanged`` lists every note it
created, so a revert deletes them as one unit (only while each is still what was written).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from server.activity.changes import FileChange, FileCreated, FilesChanged
from server.config.allowlist import Allowlist
from server.errors import KmsError
from server.vault.registry import Vault
from server.writes.cas import WriteOutcome, WriteResult
from server.writes.operations import create


def create_many(conn: apsw.Connection, vault: Vault, notes: list[dict[str, Any]], *, max_files: int,
                take_slot: Callable[[], Callable[[], None]], allowlist: Allowlist | None = None,
                lock_dir: Path | None = None) -> WriteOutcome:
    """Create each of ``notes`` (title, content, tags, folder), each with a rate-limit slot of its own."""
    if len(notes) > max_files:
        raise KmsError("too-broad", f"{len(notes)} notes in one call; at most {max_files} "
                       "(write.max_files_per_call). Nothing was changed.", count=len(notes), limit=max_files)
    results: list[dict[str, Any]] = []
    files: list[FileChange] = []
    bytes_after = 0
    own_slot = True  # the call's own slot (taken by the guard) is the first note written
    for spec in notes:
        release: Callable[[], None] | None = None
        try:
            if not own_slot:
                release = take_slot()
            out = create(conn, vault, title=spec["title"], content=spec.get("content") or "", tags=spec.get("tags"),
                         folder=spec.get("folder"), allowlist=allowlist, lock_dir=lock_dir)
        except KmsError as e:
            if release is not None:
                release()
            results.append({"title": spec["title"], "error": e.kind, "message": e.message,
                            **({"retryAfterMs": e.extra["retryAfterMs"]} if "retryAfterMs" in e.extra else {})})
            continue
        own_slot = False
        made = out.change
        assert isinstance(made, FileCreated)
        files.append(FileChange(made.path, None, 0, "", made.text, "", made.hash))
        bytes_after += out.result.get("bytesAfter", 0)
        results.append({"title": spec["title"], "ok": True, "noteId": out.result.get("noteId"),
                        "path": made.path})
    created = [r for r in results if r.get("ok")]
    result = WriteResult(noteId=created[0]["noteId"] if created else None, title=created[0]["title"] if created
                         else "", path=files[0].path if files else "", vault=vault.name, bytesBefore=0,
                         bytesAfter=bytes_after, linesAdded=0, changed=bool(files))
    result["results"], result["created"], result["failed"] = results, len(created), len(results) - len(created)
    return WriteOutcome(result, FilesChanged(result["path"], tuple(files)) if files else None)
