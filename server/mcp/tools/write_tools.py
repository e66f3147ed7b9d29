"""The write tier: its tools' input models, handlers over the operations, each spec beside its handler,
and ``WRITE_TOOLS``, the tier's tools in listing order.

Every write-tier call goes through ``server.writes.guard.WriteService.call`` (gate, this
module's input model, rate limit, the handler below, one provenance row). A handler only
binds a validated model to its operation. Limits come from ``server.writes.limits``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from server.mcp.tools.base import (
    ADD_ONLY,
    DESTRUCTIVE,
    REVERTIBLE,
    Denied,
    NoteIdField,
    StrictInput,
    ToolOutput,
    WriteSpec,
)
from server.mcp.tools.capture_tool import KMS_CAPTURE
from server.vault.properties import RESERVED_KEYS, TAG_RE
from server.writes.context import WriteContext
from server.writes.limits import (
    MAX_CATEGORY_CHARS,
    MAX_CREATE_BYTES,
    MAX_FACT_CHARS,
    MAX_FOLDER_CHARS,
    MAX_HEADING_CHARS,
    MAX_INSERT_BYTES,
    MAX_NAME_CHARS,
    MAX_NOTE_NAME_CHARS,
    MAX_QUERY_CHARS,
    MAX_SEPARATOR_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    MAX_VERSION_CHARS,
    check_bytes,
    kb,
)
from server.writes.outcome import WriteOutcome

VersionField = Field(
    default=None,
    max_length=MAX_VERSION_CHARS,
    description="Optional `version` from kms_read: write only if the note is still exactly that.",
)
PropertyValue = str | int | float | bool | list[str | int | float | bool]
MAX_BATCH = 50  # kms_create_many's schema bound; write.max_files_per_call may lower it


class CreateInput(StrictInput):
    title: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TITLE_CHARS,
        description="Note title; becomes the file name. Omit it when the content starts "
        "with a '# Title' heading: that heading gives it.",
    )
    content: str = Field(default="", description=f"Markdown body, at most {kb(MAX_CREATE_BYTES)}.")
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    folder: str | None = Field(default=None, max_length=MAX_FOLDER_CHARS, description="Vault subfolder, e.g. 'drafts'.")
    vault: str | None = Field(
        default=None,
        max_length=MAX_NAME_CHARS,
        description="Vault name when several are registered (default: the session's vault).",
    )

    @model_validator(mode="after")
    def _check(self) -> CreateInput:
        check_bytes(self.content, MAX_CREATE_BYTES, "content")
        bad = [t for t in self.tags if not TAG_RE.match(t)]
        if bad:
            raise ValueError(f"tags {bad} must match {TAG_RE.pattern} (letters, digits, '_' or '-', no '#')")
        return self


class AppendInput(StrictInput):
    noteId: str = NoteIdField
    content: str = Field(min_length=1, description=f"Markdown to add, at most {kb(MAX_INSERT_BYTES)}.")
    heading: str | None = Field(
        default=None, max_length=MAX_HEADING_CHARS, description="Append at the end of this section instead of the note."
    )
    separator: str = Field(default="\n\n", max_length=MAX_SEPARATOR_CHARS)
    version: str | None = VersionField

    @model_validator(mode="after")
    def _check(self) -> AppendInput:
        check_bytes(self.content, MAX_INSERT_BYTES, "content")
        return self


class UpdatePropertiesInput(StrictInput):
    noteId: str = NoteIdField
    set: dict[str, PropertyValue] = Field(default_factory=dict, description="Frontmatter keys to set.")
    remove: list[str] = Field(default_factory=list, description="Frontmatter keys to remove.")
    version: str | None = VersionField

    @model_validator(mode="after")
    def _check(self) -> UpdatePropertiesInput:
        if not self.set and not self.remove:
            raise ValueError("give `set` and/or `remove`")
        reserved = sorted(RESERVED_KEYS & (set(self.set) | set(self.remove)))
        if reserved:
            raise ValueError(f"the key {reserved[0]} is reserved")
        return self


class Position(StrictInput):
    afterHeading: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_HEADING_CHARS,
        description="'Tasks' or '## Tasks': at the end of that heading's section, "
        "after a blank line (as kms_append with heading).",
    )
    beforeHeading: str | None = Field(
        default=None, min_length=1, max_length=MAX_HEADING_CHARS, description="As whole lines right above that heading."
    )
    afterBlockContaining: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="As its own block after the one paragraph (or code block) containing this text.",
    )
    atLine: int | None = Field(default=None, ge=1, description="So that the text starts at this line (1-based).")

    @model_validator(mode="after")
    def _exactly_one(self) -> Position:
        given = [k for k, v in self.model_dump().items() if v is not None]
        if len(given) != 1:
            raise ValueError(
                "position needs exactly one of afterHeading, beforeHeading, afterBlockContaining, "
                f"atLine (got {given or 'none'})"
            )
        return self


class InsertAtInput(StrictInput):
    noteId: str = NoteIdField
    content: str = Field(min_length=1, description=f"Markdown to insert, at most {kb(MAX_INSERT_BYTES)}.")
    position: Position
    version: str | None = VersionField

    @model_validator(mode="after")
    def _check(self) -> InsertAtInput:
        check_bytes(self.content, MAX_INSERT_BYTES, "content")
        return self


class WriteOutput(ToolOutput):
    noteId: str | None  # None only if the file was written but re-indexing failed (see indexWarning)
    path: str
    bytesBefore: int
    bytesAfter: int
    linesAdded: int


class CreateOutput(WriteOutput):
    title: str


# The operations load the YAML editors (ruamel, PyYAML: slow to import), so the handlers import them when
# first called, not at server start; ``server.mcp.serve`` warms them in the background when writes are on.
OPERATIONS = (
    "server.writes.operations",
    "server.writes.batch",
    "server.writes.edits",
    "server.writes.link_ops",
    "server.writes.organize",
    "server.writes.folders",
)


def kms_create(ctx: WriteContext, args: CreateInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (OPERATIONS)
    from server.writes import operations

    return operations.create(
        ctx, ctx.vault(args.vault), title=args.title, content=args.content, tags=args.tags or None, folder=args.folder
    )


KMS_CREATE = WriteSpec(
    name="kms_create",
    tier="write",
    about="Create a new note (never overwrites). The title becomes the file name; put it in an "
    "allowed folder. Returns noteId, path and the bytes/lines written.",
    errors=("not-found", "folder-denied", "already-exists", "no-index"),
    input_model=CreateInput,
    output_model=CreateOutput,
    handler=kms_create,
    annotations=ADD_ONLY.model_copy(update={"title": "Create a note"}),
    example={"title": "Made", "folder": "drafts"},
    denied=Denied({"title": "Made", "folder": "drafts/sub"}, "drafts/sub/Made.md"),
)


def kms_append(ctx: WriteContext, args: AppendInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (OPERATIONS)
    from server.writes import operations

    note, vault = ctx.note(args.noteId)
    return operations.append(
        ctx, vault, note, content=args.content, heading=args.heading, separator=args.separator, version=args.version
    )


KMS_APPEND = WriteSpec(
    name="kms_append",
    tier="write",
    about="Append Markdown to the end of a note, or to the end of one section (heading). Only adds; "
    "nothing existing changes.",
    errors=("not-found", "conflict", "folder-denied"),
    input_model=AppendInput,
    output_model=WriteOutput,
    handler=kms_append,
    annotations=ADD_ONLY.model_copy(update={"title": "Append to a note"}),
    example={"noteId": "drafts/append.md", "content": "more"},
    denied=Denied({"noteId": "drafts/sub/append.md", "content": "more"}, "drafts/sub/append.md"),
)


def kms_update_properties(ctx: WriteContext, args: UpdatePropertiesInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (OPERATIONS)
    from server.writes import operations

    note, vault = ctx.note(args.noteId)
    return operations.update_properties(
        ctx, vault, note, set=args.set, remove=args.remove or None, version=args.version
    )


KMS_UPDATE_PROPERTIES = WriteSpec(
    name="kms_update_properties",
    tier="write",
    about="Set or remove YAML frontmatter properties of a note (tags, status, dates...). The body "
    "is never touched; the rest of the frontmatter is kept as written. Allowed folders only, as "
    "every write; remove deletes keys.",
    errors=("not-found", "conflict", "folder-denied"),
    input_model=UpdatePropertiesInput,
    output_model=WriteOutput,
    handler=kms_update_properties,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Update note properties", "idempotent_hint": True}),
    example={"noteId": "drafts/edit.md", "set": {"s": "x"}},
    # frontmatter holds the privacy key and aliases: no exemption
    denied=Denied({"noteId": "drafts/sub/edit.md", "remove": ["aliases"]}, "drafts/sub/edit.md"),
)


def kms_insert_at(ctx: WriteContext, args: InsertAtInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (OPERATIONS)
    from server.writes import operations

    note, vault = ctx.note(args.noteId)
    position = {k: v for k, v in args.position.model_dump().items() if v is not None}
    return operations.insert_at(ctx, vault, note, content=args.content, position=position, version=args.version)


KMS_INSERT_AT = WriteSpec(
    name="kms_insert_at",
    tier="write",
    about="Insert Markdown at one place in a note: afterHeading (at the end of that heading's "
    "section, before the next heading of the same or a higher level, as its own paragraph), "
    "beforeHeading, after the paragraph containing some text (afterBlockContaining), or at a "
    "line number (atLine). Only adds.",
    errors=("not-found", "conflict", "folder-denied"),
    input_model=InsertAtInput,
    output_model=WriteOutput,
    handler=kms_insert_at,
    annotations=ADD_ONLY.model_copy(update={"title": "Insert into a note"}),
    example={"noteId": "drafts/insert.md", "content": "top", "position": {"atLine": 1}},
    denied=Denied(
        {"noteId": "drafts/sub/insert.md", "content": "top", "position": {"atLine": 1}}, "drafts/sub/insert.md"
    ),
)


# kms_remember -------------------------------------------------------------------------------------


class RememberInput(StrictInput):
    about: Literal["person", "project"] = Field(
        description="person: about the human (preferences, how they work); project: about the current project."
    )
    text: str = Field(
        min_length=1,
        max_length=2 * MAX_FACT_CHARS,
        description=f"One durable fact, one line, at most {MAX_FACT_CHARS} characters.",
    )
    category: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CATEGORY_CHARS,
        description="A heading to file it under, e.g. 'Preferences', 'Decisions' (default General).",
    )


class RememberOutput(ToolOutput):
    status: Literal["added", "duplicate"]
    about: str
    noteId: str | None
    path: str
    category: str


def kms_remember(ctx: WriteContext, args: RememberInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (OPERATIONS)
    from server.writes.memory import remember

    return remember(ctx, about=args.about, text=args.text, category=args.category)


KMS_REMEMBER = WriteSpec(
    name="kms_remember",
    tier="write",
    about=(
        "Record one durable fact for future sessions: about the person (preferences, how they work) or "
        "the current project (decisions, conventions, where things are). It becomes a dated list item "
        "under its category in a memory note kms keeps; kms_start shows these facts next time. A fact "
        "already recorded (the same, or the same in other words) answers status duplicate with the "
        "existing line and adds nothing. Only adds."
    ),
    errors=("conflict", "folder-denied", "no-index"),
    input_model=RememberInput,
    output_model=RememberOutput,
    handler=kms_remember,
    annotations=ADD_ONLY.model_copy(update={"title": "Remember a fact"}),
    example={"about": "person", "text": "Likes tea in the morning"},
    denied="the memory folder is its own entry",
)


# kms_create_many, kms_link ---------------------------------------------------------------------


class LinkInput(StrictInput):
    noteId: str = NoteIdField
    target: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NOTE_NAME_CHARS,
        description="The note to link to, by title or path ('Target' or '[[Target]]'); it "
        "may not exist yet. Give target or targets.",
    )
    targets: list[Annotated[str, Field(min_length=1, max_length=MAX_NOTE_NAME_CHARS)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_BATCH,
        description=f"Up to {MAX_BATCH} notes to link to in one write, best effort: results[] says of each "
        "whether it was added, already there, or refused (with its error kind).",
    )
    property: str = Field(
        default="related",
        min_length=1,
        max_length=64,
        description="The frontmatter list property to add it to (default related; created as a list if "
        "absent). A property holding one text value keeps its type (refused), and tags, aliases and "
        "cssclasses hold names, not links (refused).",
    )

    @model_validator(mode="after")
    def _one_way(self) -> LinkInput:
        if (self.target is None) == (self.targets is None):
            raise ValueError("give target (one note) or targets (several), not both")
        return self


class BatchNote(StrictInput):
    """One note of kms_create_many, as kms_create takes it (its content and tags are checked per note)."""

    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, description="Note title; becomes the file name.")
    content: str = Field(default="", description=f"Markdown body, at most {kb(MAX_CREATE_BYTES)}.")
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    folder: str | None = Field(default=None, max_length=MAX_FOLDER_CHARS, description="Vault subfolder.")


class CreateManyInput(StrictInput):
    notes: list[BatchNote] = Field(
        min_length=1, max_length=MAX_BATCH, description=f"Up to {MAX_BATCH} notes, each as kms_create takes it."
    )
    vault: str | None = Field(
        default=None,
        max_length=MAX_NAME_CHARS,
        description="Vault name when several are registered (default: the session's vault).",
    )


class CreateManyOutput(ToolOutput):
    results: list[dict]
    created: int
    failed: int


class LinkOutput(ToolOutput):
    noteId: str | None
    path: str
    changed: bool
    added: list[str]
    results: list[dict] | None = None


def kms_create_many(ctx: WriteContext, args: CreateManyInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (OPERATIONS)
    from server.writes import batch

    notes = [n.model_dump() for n in args.notes]
    return batch.create_many(ctx, ctx.vault(args.vault), notes)


KMS_CREATE_MANY = WriteSpec(
    name="kms_create_many",
    tier="write",
    about=f"Create up to {MAX_BATCH} new notes in one call (each as kms_create: never overwrites, "
    "allowed folders only). Best effort: results[] marks each ok (with noteId and path) or "
    "with an error kind; each note counts against the rate limit. Use it to file many notes "
    f"at once; for one note use kms_create. {REVERTIBLE}",
    errors=("not-found", "folder-denied", "already-exists", "too-broad", "no-index"),
    input_model=CreateManyInput,
    output_model=CreateManyOutput,
    handler=kms_create_many,
    annotations=ADD_ONLY.model_copy(update={"title": "Create several notes"}),
    example={"notes": [{"title": "Many", "folder": "drafts"}, {"title": "Deep", "folder": "inbox/a/b"}]},
    denied=Denied({"notes": [{"title": "Many", "folder": "drafts/sub"}]}, "drafts/sub/Many.md"),
)


def kms_link(ctx: WriteContext, args: LinkInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call (OPERATIONS)
    from server.writes import link_ops

    note, vault = ctx.note(args.noteId)
    if args.targets is not None:
        return link_ops.link_many(ctx, vault, note, targets=args.targets, prop=args.property)
    assert args.target is not None  # (the input model's rule)
    return link_ops.link(ctx, vault, note, target=args.target, prop=args.property)


KMS_LINK = WriteSpec(
    name="kms_link",
    tier="write",
    about='Link a note to others in its frontmatter: adds "[[Target]]" to a list property '
    "(default related). Only adds; a link already there changes nothing (changed false). The "
    "target may not exist yet, but must be in the note's vault (another vault's note is refused). "
    "The note must be in an allowed folder, as for every write. "
    f"targets adds several in one write, each reported in results[]. {REVERTIBLE}",
    errors=("not-found", "conflict", "folder-denied"),
    input_model=LinkInput,
    output_model=LinkOutput,
    handler=kms_link,
    annotations=ADD_ONLY.model_copy(update={"title": "Link two notes", "idempotent_hint": True}),
    example={"noteId": "drafts/edit.md", "target": "Elsewhere"},
    denied=Denied({"noteId": "drafts/sub/edit.md", "targets": ["Elsewhere", "Other"]}, "drafts/sub/edit.md"),
)


# the write tier, in listing order
WRITE_TOOLS: tuple[WriteSpec, ...] = (
    KMS_CREATE,
    KMS_APPEND,
    KMS_UPDATE_PROPERTIES,
    KMS_INSERT_AT,
    KMS_REMEMBER,
    KMS_CREATE_MANY,
    KMS_LINK,
    KMS_CAPTURE,
)
