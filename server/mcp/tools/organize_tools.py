"""The edit and organise tiers: kms_edit (edit), kms_move, kms_rename, kms_trash (organize), and the
write tier's kms_link.

Each is one registry entry run by the write guard (``server.writes.guard``) like every write
tool: its own tier's gate, this module's strict input, the rate limit, the operation
(``server.writes.edits``, ``server.writes.organize``), one provenance row with the per-file
change, which the dashboard and ``kms revert`` undo as one unit.
"""

from __future__ import annotations

from mcp_types import ToolAnnotations
from pydantic import Field, model_validator

from server.mcp.tools.base import StrictInput, ToolOutput, ToolSpec
from server.mcp.tools.write_tools import NoteIdField, _max_bytes
from server.writes.context import WriteContext
from server.writes.limits import (
    MAX_CREATE_BYTES,
    MAX_FOLDER_CHARS,
    MAX_HEADING_CHARS,
    MAX_INSERT_BYTES,
    MAX_NAME_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    kb,
)
from server.writes.outcome import WriteOutcome

MAX_EDITS = 50
MAX_BATCH = 50  # kms_create_many's schema bound; write.max_files_per_call may lower it

DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                              open_world_hint=False)


class Replace(StrictInput):
    old: str = Field(min_length=1, description="Text that occurs exactly once in the body (quote enough of it).")
    new: str = Field(description="What replaces it; empty deletes it.")


class ReplaceSection(StrictInput):
    heading: str = Field(min_length=1, max_length=MAX_HEADING_CHARS, description="'Tasks' or '## Tasks'.")
    content: str = Field(description="The section's new content (the heading line stays); empty empties it.")


class EditStep(StrictInput):
    replace: Replace | None = None
    replaceSection: ReplaceSection | None = None
    prepend: str | None = Field(default=None, min_length=1,
                                description="Markdown put at the top of the body (after frontmatter and summary).")

    @model_validator(mode="after")
    def _exactly_one(self) -> EditStep:
        given = [k for k in ("replace", "replaceSection", "prepend") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"each edit needs exactly one of replace, replaceSection, prepend (got {given or 'none'})")
        for text in (self.replace.old if self.replace else "", self.replace.new if self.replace else "",
                     self.replaceSection.content if self.replaceSection else "", self.prepend or ""):
            _max_bytes(text, MAX_INSERT_BYTES, "edit text")
        return self


class EditInput(StrictInput):
    noteId: str = NoteIdField
    version: str = Field(pattern=r"^[0-9a-f]{64}$", description="The `version` kms_read returned (required).")
    edits: list[EditStep] = Field(min_length=1, max_length=MAX_EDITS, description="Applied in order, all or nothing.")


class MoveInput(StrictInput):
    noteId: str = NoteIdField
    folder: str = Field(max_length=MAX_FOLDER_CHARS, description="Destination folder ('' = the vault root).")


class RenameInput(StrictInput):
    noteId: str = NoteIdField
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, description="The new title (the file name).")
    keepAlias: bool = Field(default=True, description="Add the old title to the note's aliases (default true).")


class TrashInput(StrictInput):
    noteId: str = NoteIdField


class LinkInput(StrictInput):
    noteId: str = NoteIdField
    target: str = Field(min_length=1, max_length=MAX_TITLE_CHARS + 4,
                        description="The note to link to, by title or path ('Target' or '[[Target]]'); it may not "
                                    "exist yet.")
    property: str = Field(default="related", min_length=1, max_length=64,
                          description="The frontmatter list property to add it to (default related).")


class BatchNote(StrictInput):
    """One note of kms_create_many, as kms_create takes it (its content and tags are checked per note)."""

    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, description="Note title; becomes the file name.")
    content: str = Field(default="", description=f"Markdown body, at most {kb(MAX_CREATE_BYTES)}.")
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    folder: str | None = Field(default=None, max_length=MAX_FOLDER_CHARS, description="Vault subfolder.")


class CreateManyInput(StrictInput):
    notes: list[BatchNote] = Field(min_length=1, max_length=MAX_BATCH,
                                   description=f"Up to {MAX_BATCH} notes, each as kms_create takes it.")
    vault: str | None = Field(default=None, max_length=MAX_NAME_CHARS,
                              description="Vault name when several are registered (default: the session's vault).")


class CreateManyOutput(ToolOutput):
    results: list[dict]
    created: int
    failed: int


class LinkOutput(ToolOutput):
    noteId: str | None
    path: str
    changed: bool


class EditOutput(ToolOutput):
    noteId: str | None
    path: str
    version: str
    linesRemoved: int
    linesAdded: int
    bytesBefore: int
    bytesAfter: int


class OrganizeOutput(ToolOutput):
    noteId: str | None
    path: str
    oldPath: str
    filesChanged: int
    linesRemoved: int
    linesAdded: int
    bytesBefore: int
    bytesAfter: int


def kms_link(ctx: WriteContext, args: LinkInput) -> WriteOutcome:
    from server.writes import link_ops  # at first call: write_tools.OPERATIONS
    note, vault = ctx.note(args.noteId)
    return link_ops.link(ctx, vault, note, target=args.target, prop=args.property)


def kms_create_many(ctx: WriteContext, args: CreateManyInput) -> WriteOutcome:
    from server.writes import batch  # at first call: write_tools.OPERATIONS
    notes = [n.model_dump() for n in args.notes]
    return batch.create_many(ctx, ctx.vault(args.vault), notes)


def kms_edit(ctx: WriteContext, args: EditInput) -> WriteOutcome:
    from server.writes import edits  # at first call: write_tools.OPERATIONS
    note, vault = ctx.note(args.noteId)
    steps = [s.model_dump(exclude_none=True) for s in args.edits]
    return edits.edit(ctx, vault, note, version=args.version, edits=steps)


def kms_move(ctx: WriteContext, args: MoveInput) -> WriteOutcome:
    from server.writes import organize  # at first call: write_tools.OPERATIONS
    note, vault = ctx.note(args.noteId)
    return organize.move(ctx, vault, note, folder=args.folder)


def kms_rename(ctx: WriteContext, args: RenameInput) -> WriteOutcome:
    from server.writes import organize  # at first call: write_tools.OPERATIONS
    note, vault = ctx.note(args.noteId)
    return organize.rename(ctx, vault, note, title=args.title, keep_alias=args.keepAlias)


def kms_trash(ctx: WriteContext, args: TrashInput) -> WriteOutcome:
    from server.writes import organize  # at first call: write_tools.OPERATIONS
    note, vault = ctx.note(args.noteId)
    return organize.trash(ctx, vault, note)


_RECOVER = ("Errors: not-found, feature-disabled, rate-limited (wait retryAfterMs), conflict (kms_read again and "
            "retry), folder-denied, already-exists, too-broad, invalid-input, paused, revoked, rejected (the person "
            "declined it: do not retry it unchanged), approval-timeout. A person can revert the whole call "
            "from the dashboard.")

LINK_TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="kms_create_many",
        tier="write",
        description=f"Create up to {MAX_BATCH} new notes in one call (each as kms_create: never overwrites, "
                    "allowed folders only). Best effort: results[] marks each ok (with noteId and path) or "
                    "with an error kind; each note counts against the rate limit. Use it to file many notes "
                    "at once; for one note use kms_create. " + _RECOVER,
        input_model=CreateManyInput,
        output_model=CreateManyOutput,
        handler=kms_create_many,
        annotations=ToolAnnotations(title="Create several notes", read_only_hint=False, destructive_hint=False,
                                    idempotent_hint=False, open_world_hint=False),
    ),
    ToolSpec(
        name="kms_link",
        tier="write",
        description="Link a note to another in its frontmatter: adds \"[[Target]]\" to a list property "
                    "(default related). Only adds; a link already there changes nothing (changed false). The "
                    "target may not exist yet. " + _RECOVER,
        input_model=LinkInput,
        output_model=LinkOutput,
        handler=kms_link,
        annotations=ToolAnnotations(title="Link two notes", read_only_hint=False, destructive_hint=False,
                                    idempotent_hint=True, open_world_hint=False),
    ),
]

EDIT_TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="kms_edit",
        tier="edit",
        description="Correct or delete text in a note's body: a list of edits applied in order, all or nothing, "
                    "only if the note is still the `version` kms_read gave. replace {old, new} (old must occur "
                    "exactly once; new may be empty), replaceSection {heading, content} (up to the next heading "
                    "of the same or a higher level), prepend (after frontmatter and summary). Not for "
                    "frontmatter (kms_update_properties) nor for only adding (kms_append, kms_insert_at). "
                    f"At most {MAX_EDITS} edits of {kb(MAX_INSERT_BYTES)}. Returns lines removed and added, "
                    "bytes before and after and the new version. " + _RECOVER,
        input_model=EditInput,
        output_model=EditOutput,
        handler=kms_edit,
        annotations=DESTRUCTIVE.model_copy(update={"title": "Edit a note"}),
    ),
]

ORGANIZE_TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="kms_move",
        tier="organize",
        description="Move a note to another folder, keeping its id and name. Every link to it written as a "
                    "path is rewritten in every note, in the style it was written; links by title keep "
                    "working. Both folders must be allowed. Returns the new path and the notes whose links "
                    "changed. " + _RECOVER,
        input_model=MoveInput,
        output_model=OrganizeOutput,
        handler=kms_move,
        annotations=DESTRUCTIVE.model_copy(update={"title": "Move a note"}),
    ),
    ToolSpec(
        name="kms_rename",
        tier="organize",
        description="Rename a note (its title and file name), keeping its id. Every link to it in every note "
                    "is rewritten in the style it was written (path, alias, heading and embed kept); the old "
                    "title is added to its aliases unless keepAlias is false. The note's own text, its "
                    "# heading included, is left as written (as Obsidian does): change it with kms_edit. A "
                    "change of case only is a rename too. Returns the new path, the notes whose links changed "
                    "and the blast radius (files, lines and bytes). " + _RECOVER,
        input_model=RenameInput,
        output_model=OrganizeOutput,
        handler=kms_rename,
        annotations=DESTRUCTIVE.model_copy(update={"title": "Rename a note"}),
    ),
    ToolSpec(
        name="kms_trash",
        tier="organize",
        description="Put a note in the vault's .trash/ folder (never deleted for good; the person restores or "
                    "empties it). Links to it are left as they are and reported, so fix or remove them next. "
                    + _RECOVER,
        input_model=TrashInput,
        output_model=OrganizeOutput,
        handler=kms_trash,
        annotations=DESTRUCTIVE.model_copy(update={"title": "Trash a note"}),
    ),
]
