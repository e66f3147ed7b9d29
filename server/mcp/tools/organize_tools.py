"""The organize tier: ``kms_move``, ``kms_rename``, ``kms_trash``, each spec beside its handler, and
``ORGANIZE_TOOLS``, the tier's tools in listing order.

Each is run by the write guard (``server.writes.guard``) like every write tool: the organize tier's
gate, this module's strict input, the rate limit, the operation (``server.writes.organize``), one
provenance row with the per-file change, which the dashboard and ``kms revert`` undo as one unit.
"""

from __future__ import annotations

from pydantic import Field

from server.mcp.tools.base import DESTRUCTIVE, REVERTIBLE, StrictInput, ToolOutput, WriteSpec
from server.mcp.tools.write_tools import NoteIdField
from server.writes.context import WriteContext
from server.writes.limits import MAX_FOLDER_CHARS, MAX_TITLE_CHARS
from server.writes.outcome import WriteOutcome


class MoveInput(StrictInput):
    noteId: str = NoteIdField
    folder: str = Field(max_length=MAX_FOLDER_CHARS, description="Destination folder ('' = the vault root).")


class RenameInput(StrictInput):
    noteId: str = NoteIdField
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, description="The new title (the file name).")
    keepAlias: bool = Field(default=True, description="Add the old title to the note's aliases (default true).")


class TrashInput(StrictInput):
    noteId: str = NoteIdField


class OrganizeOutput(ToolOutput):
    noteId: str | None
    path: str
    oldPath: str
    filesChanged: int
    linesRemoved: int
    linesAdded: int
    bytesBefore: int
    bytesAfter: int


def kms_move(ctx: WriteContext, args: MoveInput) -> WriteOutcome:
    from server.writes import organize  # at first call: write_tools.OPERATIONS
    note, vault = ctx.note(args.noteId)
    return organize.move(ctx, vault, note, folder=args.folder)


KMS_MOVE = WriteSpec(
    name="kms_move",
    tier="organize",
    about="Move a note to another folder, keeping its id and name. Every link to it written as a "
          "path is rewritten in every note, in the style it was written; links by title keep "
          "working. Both folders must be allowed. Returns the new path and the notes whose links "
          "changed. " + REVERTIBLE,
    errors=("not-found", "conflict", "folder-denied", "already-exists", "too-broad"),
    input_model=MoveInput,
    output_model=OrganizeOutput,
    handler=kms_move,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Move a note"}),
)


def kms_rename(ctx: WriteContext, args: RenameInput) -> WriteOutcome:
    from server.writes import organize  # at first call: write_tools.OPERATIONS
    note, vault = ctx.note(args.noteId)
    return organize.rename(ctx, vault, note, title=args.title, keep_alias=args.keepAlias)


KMS_RENAME = WriteSpec(
    name="kms_rename",
    tier="organize",
    about="Rename a note (its title and file name), keeping its id. Every link to it in every note "
          "is rewritten in the style it was written (path, alias, heading and embed kept); the old "
          "title is added to its aliases unless keepAlias is false. The note's own text, its "
          "# heading included, is left as written (as Obsidian does): change it with kms_edit. A "
          "change of case only is a rename too. Returns the new path, the notes whose links changed "
          "and the blast radius (files, lines and bytes). " + REVERTIBLE,
    errors=("not-found", "conflict", "folder-denied", "already-exists", "too-broad"),
    input_model=RenameInput,
    output_model=OrganizeOutput,
    handler=kms_rename,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Rename a note"}),
)


def kms_trash(ctx: WriteContext, args: TrashInput) -> WriteOutcome:
    from server.writes import organize  # at first call: write_tools.OPERATIONS
    note, vault = ctx.note(args.noteId)
    return organize.trash(ctx, vault, note)


KMS_TRASH = WriteSpec(
    name="kms_trash",
    tier="organize",
    about="Put a note in the vault's .trash/ folder (never deleted for good; the person restores or "
          "empties it). Links to it are left as they are and reported, so fix or remove them next. "
          + REVERTIBLE,
    errors=("not-found", "conflict", "folder-denied"),
    input_model=TrashInput,
    output_model=OrganizeOutput,
    handler=kms_trash,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Trash a note"}),
)


# the organize tier, in listing order
ORGANIZE_TOOLS: tuple[WriteSpec, ...] = (KMS_MOVE, KMS_RENAME, KMS_TRASH)
