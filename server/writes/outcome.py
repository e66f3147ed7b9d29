"""What a write call ends with: the agent's answer, the typed change record, the hashes either side.

Every operation returns a ``WriteOutcome``; the guard turns it into the provenance row
(``record.record_call``) and the agent's result. A compute step (``cas.write_note``) returns an ``Edit``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from server.activity.changes import Change


class WriteResult(TypedDict, total=False):
    """What the agent is told: the note and the blast radius of the write."""

    noteId: str | None
    title: str
    path: str
    vault: str
    bytesBefore: int
    bytesAfter: int
    linesAdded: int
    linesRemoved: int  # kms_edit and the organise tools: the blast radius is both ways
    filesChanged: int  # the organise tools: how many files the unit changed (the note and its linking notes)
    edits: list[dict]  # kms_edit: where each step applied
    oldPath: str  # a move, rename or trash: where the note was
    linksRewritten: dict  # a move or rename: the visible notes whose links changed, and a count of hidden ones
    linksLeft: dict  # a trash: the links now pointing at nothing
    results: list[dict]  # kms_create_many: one per note, ok or an error kind; kms_link: one per target
    added: list[str]  # kms_link: the links it added (one already there is not)
    created: int
    failed: int
    version: str  # sha256 of the new file bytes: pass it as ``version`` to the next write
    changed: bool
    indexWarning: str
    folder: str  # a folder moved or renamed: where it was
    newFolder: str  # and where it is now
    notesMoved: int  # its notes (the hidden ones counted, never named)
    hiddenNotesMoved: int
    linkingNotes: int  # the notes outside it linking to one of its notes
    dryRun: bool  # nothing was written: the counts are what the call would change
    withinLimit: bool  # whether the call fits in write.max_files_per_call


@dataclass
class WriteOutcome:
    """A finished write: what the agent is told, and the typed change provenance records."""

    result: WriteResult
    change: Change | None = None  # None: nothing changed
    hash_before: str | None = None
    hash_after: str | None = None

    @property
    def changed(self) -> bool:
        return self.result.get("changed", True)


@dataclass
class Edit:
    """What a compute step wants: the whole new text and the change it makes."""

    new_text: str
    change: Change | None = None
