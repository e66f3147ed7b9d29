"""The guarded write tools: contracts, input models and handlers over the operations.

Every write-tier call goes through ``server.writes.guard.WriteService.call`` (gate, this
module's input model, rate limit, the handler below, one provenance row). A handler only
binds a validated model to its operation. Limits come from ``server.writes.limits``.
"""

from __future__ import annotations

from mcp_types import ToolAnnotations
from pydantic import Field, model_validator

from server.mcp.tools.base import StrictInput, ToolOutput, ToolSpec
from server.vault.properties import RESERVED_KEYS, TAG_RE
from server.writes.context import WriteContext
from server.writes.limits import (
    MAX_CREATE_BYTES,
    MAX_FOLDER_CHARS,
    MAX_HEADING_CHARS,
    MAX_INSERT_BYTES,
    MAX_NAME_CHARS,
    MAX_QUERY_CHARS,
    MAX_SEPARATOR_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    MAX_VERSION_CHARS,
    kb,
)
from server.writes.outcome import WriteOutcome

ADD_ONLY = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                           open_world_hint=False)
NoteIdField = Field(min_length=1, max_length=MAX_NAME_CHARS, description="A noteId from kms_search / kms_read.")
VersionField = Field(default=None, max_length=MAX_VERSION_CHARS,
                     description="Optional `version` from kms_read: write only if the note is still exactly that.")
PropertyValue = str | int | float | bool | list[str | int | float | bool]


def _max_bytes(value: str, limit: int, name: str) -> str:
    size = len(value.encode("utf-8"))
    if size > limit:
        raise ValueError(f"{name} is {size} bytes; at most {limit} bytes ({kb(limit)})")
    return value


class CreateInput(StrictInput):
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, description="Note title; becomes the file name.")
    content: str = Field(default="", description=f"Markdown body, at most {kb(MAX_CREATE_BYTES)}.")
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    folder: str | None = Field(default=None, max_length=MAX_FOLDER_CHARS, description="Vault subfolder, e.g. 'drafts'.")
    vault: str | None = Field(default=None, max_length=MAX_NAME_CHARS,
                              description="Vault name when several are registered (default: the session's vault).")

    @model_validator(mode="after")
    def _check(self) -> CreateInput:
        _max_bytes(self.content, MAX_CREATE_BYTES, "content")
        bad = [t for t in self.tags if not TAG_RE.match(t)]
        if bad:
            raise ValueError(f"tags {bad} must match {TAG_RE.pattern} (letters, digits, '_' or '-', no '#')")
        return self


class AppendInput(StrictInput):
    noteId: str = NoteIdField
    content: str = Field(min_length=1, description=f"Markdown to add, at most {kb(MAX_INSERT_BYTES)}.")
    heading: str | None = Field(default=None, max_length=MAX_HEADING_CHARS,
                                description="Append at the end of this section instead of the note.")
    separator: str = Field(default="\n\n", max_length=MAX_SEPARATOR_CHARS)
    version: str | None = VersionField

    @model_validator(mode="after")
    def _check(self) -> AppendInput:
        _max_bytes(self.content, MAX_INSERT_BYTES, "content")
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
    afterHeading: str | None = Field(default=None, min_length=1, max_length=MAX_HEADING_CHARS,
                                     description="'Tasks' or '## Tasks': at the end of that heading's section, "
                                                 "after a blank line (as kms_append with heading).")
    beforeHeading: str | None = Field(default=None, min_length=1, max_length=MAX_HEADING_CHARS,
                                      description="As whole lines right above that heading.")
    afterBlockContaining: str | None = Field(default=None, min_length=1, max_length=MAX_QUERY_CHARS,
                                             description="As its own block after the one paragraph (or code "
                                                         "block) containing this text.")
    atLine: int | None = Field(default=None, ge=1, description="So that the text starts at this line (1-based).")

    @model_validator(mode="after")
    def _exactly_one(self) -> Position:
        given = [k for k, v in self.model_dump().items() if v is not None]
        if len(given) != 1:
            raise ValueError("position needs exactly one of afterHeading, beforeHeading, afterBlockContaining, "
                             f"atLine (got {given or 'none'})")
        return self


class InsertAtInput(StrictInput):
    noteId: str = NoteIdField
    content: str = Field(min_length=1, description=f"Markdown to insert, at most {kb(MAX_INSERT_BYTES)}.")
    position: Position
    version: str | None = VersionField

    @model_validator(mode="after")
    def _check(self) -> InsertAtInput:
        _max_bytes(self.content, MAX_INSERT_BYTES, "content")
        return self


class WriteOutput(ToolOutput):
    noteId: str | None  # None only if the file was written but re-indexing failed (see indexWarning)
    path: str
    bytesBefore: int
    bytesAfter: int
    linesAdded: int


class CreateOutput(WriteOutput):
    title: str


# The operations load the YAML editors (ruamel, PyYAML: ~25 ms), so the handlers import them when
# first called, not at server start; ``server.mcp.serve`` warms them in the background when writes are on.
OPERATIONS = ("server.writes.operations", "server.writes.batch", "server.writes.edits", "server.writes.link_ops",
              "server.writes.organize")


def kms_create(ctx: WriteContext, args: CreateInput) -> WriteOutcome:
    from server.writes import operations  # see OPERATIONS
    return operations.create(ctx, ctx.vault(args.vault), title=args.title, content=args.content,
                             tags=args.tags or None, folder=args.folder)


def kms_append(ctx: WriteContext, args: AppendInput) -> WriteOutcome:
    from server.writes import operations  # see OPERATIONS
    note, vault = ctx.note(args.noteId)
    return operations.append(ctx, vault, note, content=args.content, heading=args.heading, separator=args.separator,
                             version=args.version)


def kms_update_properties(ctx: WriteContext, args: UpdatePropertiesInput) -> WriteOutcome:
    from server.writes import operations  # see OPERATIONS
    note, vault = ctx.note(args.noteId)
    return operations.update_properties(ctx, vault, note, set=args.set, remove=args.remove or None,
                                        version=args.version)


def kms_insert_at(ctx: WriteContext, args: InsertAtInput) -> WriteOutcome:
    from server.writes import operations  # see OPERATIONS
    note, vault = ctx.note(args.noteId)
    position = {k: v for k, v in args.position.model_dump().items() if v is not None}
    return operations.insert_at(ctx, vault, note, content=args.content, position=position, version=args.version)


_RECOVER = ("Errors: not-found (check the noteId with kms_search), feature-disabled, rate-limited (wait "
            "retryAfterMs), conflict (kms_read again and retry), folder-denied (use an allowed folder), "
            "already-exists, invalid-input; paused or revoked (the person stopped this session's writes), "
            "rejected (the person declined this change: do not retry it unchanged), approval-timeout.")

WRITE_TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="kms_create",
        tier="write",
        description="Create a new note (never overwrites). The title becomes the file name; put it in an "
                    "allowed folder. Returns noteId, path and the bytes/lines written. " + _RECOVER,
        input_model=CreateInput,
        output_model=CreateOutput,
        handler=kms_create,
        annotations=ADD_ONLY.model_copy(update={"title": "Create a note"}),
    ),
    ToolSpec(
        name="kms_append",
        tier="write",
        description="Append Markdown to the end of a note, or to the end of one section (heading). Only adds; "
                    "nothing existing changes. " + _RECOVER,
        input_model=AppendInput,
        output_model=WriteOutput,
        handler=kms_append,
        annotations=ADD_ONLY.model_copy(update={"title": "Append to a note"}),
    ),
    ToolSpec(
        name="kms_update_properties",
        tier="write",
        description="Set or remove YAML frontmatter properties of a note (tags, status, dates...). The body "
                    "is never touched; the rest of the frontmatter is kept as written. " + _RECOVER,
        input_model=UpdatePropertiesInput,
        output_model=WriteOutput,
        handler=kms_update_properties,
        annotations=ADD_ONLY.model_copy(update={"title": "Update note properties", "idempotent_hint": True}),
    ),
    ToolSpec(
        name="kms_insert_at",
        tier="write",
        description="Insert Markdown at one place in a note: afterHeading (at the end of that heading's "
                    "section, before the next heading of the same or a higher level, as its own paragraph), "
                    "beforeHeading, after the paragraph containing some text (afterBlockContaining), or at a "
                    "line number (atLine). Only adds. " + _RECOVER,
        input_model=InsertAtInput,
        output_model=WriteOutput,
        handler=kms_insert_at,
        annotations=ADD_ONLY.model_copy(update={"title": "Insert into a note"}),
    ),
]
