"""The organize tier: ``kms_move``, ``kms_rename``, ``kms_trash``, ``kms_move_folder``, ``kms_rename_folder``,
each spec beside its handler, and ``ORGANIZE_TOOLS``, the tier's tools in listing order.

Each is run by the write guard (``server.writes.guard``) like every write tool: the organize tier's
gate, this module's strict input, the rate limit, the operation (``server.writes.organize``), one
provenance row with the per-file change, which the dashboard and ``kms revert`` undo as one unit.
"""

from __future__ import annotations

from pydantic import Field

from server.errors import KmsError
from server.mcp.tools.base import DESTRUCTIVE, REVERTIBLE, Denied, NoteIdField, StrictInput, ToolOutput, WriteSpec
from server.writes.context import WriteContext
from server.writes.limits import MAX_FOLDER_CHARS, MAX_NAME_CHARS, MAX_TITLE_CHARS
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
    # deferred: the YAML editors at the first call (write_tools.OPERATIONS)
    from server.writes import folders, organize

    try:
        note, vault = ctx.note(args.noteId)
    except KmsError as e:
        if e.kind == "not-found" and folders.names_a_folder(ctx, args.noteId):
            raise KmsError(
                "not-found",
                f"{args.noteId!r} is a folder, not a note: move it with kms_move_folder (every note in it, links kept)",
                folder=args.noteId,
            ) from None
        raise
    return organize.move(ctx, vault, note, folder=args.folder)


KMS_MOVE = WriteSpec(
    name="kms_move",
    tier="organize",
    about="Move a note to another folder, keeping its id and name. Every link to it written as a "
    "path is rewritten in every note, in the style it was written; links by title keep "
    "working. Both folders must be allowed, where they really are (a symlinked folder counts as its "
    "target), and so must every note whose links would change (else folder-denied with "
    "notesOutsideScope, nothing changed). Returns the new path and the notes whose links "
    "changed. " + REVERTIBLE,
    errors=("not-found", "conflict", "folder-denied", "already-exists", "too-broad"),
    input_model=MoveInput,
    output_model=OrganizeOutput,
    handler=kms_move,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Move a note"}),
    example={"noteId": "drafts/move.md", "folder": "inbox/later"},
    # the note may be moved, but not to where it is sent
    denied=Denied({"noteId": "drafts/move2.md", "folder": "drafts/sub"}, "drafts/sub/move2.md"),
)


def kms_rename(ctx: WriteContext, args: RenameInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (write_tools.OPERATIONS)
    from server.writes import organize

    note, vault = ctx.note(args.noteId)
    return organize.rename(ctx, vault, note, title=args.title, keep_alias=args.keepAlias)


KMS_RENAME = WriteSpec(
    name="kms_rename",
    tier="organize",
    about="Rename a note (its title and file name), keeping its id. Every link to it in every note "
    "is rewritten in the style it was written (path, alias, heading and embed kept); the old "
    "title is added to its aliases unless keepAlias is false. The note's own text, its "
    "# heading included, is left as written (as Obsidian does): change it with kms_edit. A "
    "change of case only is a rename too. Every note whose links would change must be in a folder this "
    "session may write (else folder-denied with notesOutsideScope, nothing changed). "
    "Returns the new path, the notes whose links changed "
    "and the blast radius (files, lines and bytes). " + REVERTIBLE,
    errors=("not-found", "conflict", "folder-denied", "already-exists", "too-broad"),
    input_model=RenameInput,
    output_model=OrganizeOutput,
    handler=kms_rename,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Rename a note"}),
    example={"noteId": "drafts/rename.md", "title": "Renamed"},
    denied=Denied({"noteId": "drafts/sub/rename.md", "title": "Renamed"}, "drafts/sub/rename.md"),
)


def kms_trash(ctx: WriteContext, args: TrashInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (write_tools.OPERATIONS)
    from server.writes import organize

    note, vault = ctx.note(args.noteId)
    return organize.trash(ctx, vault, note)


KMS_TRASH = WriteSpec(
    name="kms_trash",
    tier="organize",
    about="Put a note in the vault's .trash/ folder (never deleted for good; the person restores or "
    "empties it). Links to it are left as they are and reported, so fix or remove them next. " + REVERTIBLE,
    errors=("not-found", "conflict", "folder-denied"),
    input_model=TrashInput,
    output_model=OrganizeOutput,
    handler=kms_trash,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Trash a note"}),
    example={"noteId": "drafts/trash.md"},
    denied=Denied({"noteId": "drafts/sub/trash.md"}, "drafts/sub/trash.md"),
)


class FolderInput(StrictInput):
    folder: str = Field(min_length=1, max_length=MAX_FOLDER_CHARS, description="The folder, from the vault root.")
    vault: str | None = Field(
        default=None, max_length=MAX_NAME_CHARS, description="The vault (default: the session's, or the only one)."
    )
    dryRun: bool = Field(
        default=False,
        description="Only count what the call would change (notes moved, "
        "linking notes, whether it fits the per-call limit); write nothing.",
    )


class MoveFolderInput(FolderInput):
    to: str = Field(max_length=MAX_FOLDER_CHARS, description="The folder it goes into ('' = the vault root).")


class RenameFolderInput(FolderInput):
    name: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, description="The folder's new name (one name).")


class FolderOutput(ToolOutput):
    folder: str
    newFolder: str
    notesMoved: int
    hiddenNotesMoved: int
    linkingNotes: int
    filesChanged: int


FOLDER_ERRORS = ("not-found", "conflict", "folder-denied", "already-exists", "too-broad")
FOLDER_ANSWER = (
    "Every note in it (its subfolders too) moves as one unit, keeping its id; every link to any of "
    "them in every note is rewritten in the style it was written. Other files stay. The call "
    "counts the folder's notes and the notes linking to them against the per-call file limit "
    "(too-broad, nothing changed, when over; staged for the person instead when they approve "
    "writes); dryRun true answers those counts first, writing "
    "nothing. A folder with no note you can see is not-found; a note hidden by where it is stays there; "
    "no note moves where a privacy rule hides notes (folder-denied, nothing changed), nor where this session "
    "may not write, nor when links would change in a note it may not write (folder-denied with notesOutsideScope). "
    "Returns notesMoved, "
    "hiddenNotesMoved (never named), linkingNotes, the notes whose "
    "links changed and the blast radius (files, lines, bytes). " + REVERTIBLE
)


def kms_move_folder(ctx: WriteContext, args: MoveFolderInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (write_tools.OPERATIONS)
    from server.writes import folders

    return folders.move_folder(ctx, ctx.vault(args.vault), args.folder, to=args.to, dry_run=args.dryRun)


KMS_MOVE_FOLDER = WriteSpec(
    name="kms_move_folder",
    tier="organize",
    about="Move a folder into another folder, keeping its name. " + FOLDER_ANSWER,
    errors=FOLDER_ERRORS,
    input_model=MoveFolderInput,
    output_model=FolderOutput,
    handler=kms_move_folder,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Move a folder"}),
    example={"folder": "inbox/a", "to": "inbox/c"},
    denied=Denied({"folder": "inbox/x", "to": "drafts"}, "drafts/x/n.md"),  # drafts/x/ is below drafts/*
)


def kms_rename_folder(ctx: WriteContext, args: RenameFolderInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (write_tools.OPERATIONS)
    from server.writes import folders

    return folders.rename_folder(ctx, ctx.vault(args.vault), args.folder, name=args.name, dry_run=args.dryRun)


KMS_RENAME_FOLDER = WriteSpec(
    name="kms_rename_folder",
    tier="organize",
    about="Rename a folder where it is. " + FOLDER_ANSWER,
    errors=FOLDER_ERRORS,
    input_model=RenameFolderInput,
    output_model=FolderOutput,
    handler=kms_rename_folder,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Rename a folder"}),
    example={"folder": "inbox/x", "name": "d"},
    denied=Denied({"folder": "drafts/sub", "name": "other"}, "drafts/sub/append.md"),
)


# the organize tier, in listing order
ORGANIZE_TOOLS: tuple[WriteSpec, ...] = (KMS_MOVE, KMS_RENAME, KMS_TRASH, KMS_MOVE_FOLDER, KMS_RENAME_FOLDER)
