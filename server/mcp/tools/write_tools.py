"""The guarded write tools: contracts, input models and thin handlers over ``WriteService``.

The service does the guarding (rate limit, allowlist, optimistic concurrency, atomic
write, re-index, provenance). Refusals that happen before the service (tier off, invalid
input) are recorded here, so provenance holds every write call, success or not.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_types import ToolAnnotations
from pydantic import Field, model_validator

from server.activity import provenance
from server.config.session import SessionConfig
from server.errors import KmsError
from server.mcp.tools.base import StrictInput, ToolContext, ToolOutput, ToolSpec
from server.store.db import thread_connection

TAG_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$"
ADD_ONLY = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                           open_world_hint=False)
NoteIdField = Field(min_length=1, max_length=64, description="A noteId from kms_search / kms_read.")
VersionField = Field(default=None, max_length=128,
                     description="Optional `version` from kms_read: write only if the note is still exactly that.")
PropertyValue = str | int | float | bool | list[str | int | float | bool]


def _max_bytes(value: str, limit: int, name: str) -> str:
    size = len(value.encode("utf-8"))
    if size > limit:
        raise ValueError(f"{name} is {size} bytes; at most {limit} bytes ({limit // 1000} KB)")
    return value


class CreateInput(StrictInput):
    title: str = Field(min_length=1, max_length=300, description="Note title; becomes the file name.")
    content: str = Field(default="", description="Markdown body, at most 100 KB.")
    tags: list[str] = Field(default_factory=list, max_length=50)
    folder: str | None = Field(default=None, max_length=500, description="Vault subfolder, e.g. 'drafts'.")
    vault: str | None = Field(default=None, max_length=64, description="Vault name when several are registered.")

    @model_validator(mode="after")
    def _check(self) -> CreateInput:
        _max_bytes(self.content, 100_000, "content")
        bad = [t for t in self.tags if not re.match(TAG_PATTERN, t)]
        if bad:
            raise ValueError(f"tags {bad} must match {TAG_PATTERN} (letters, digits, '_' or '-', no '#')")
        return self


class AppendInput(StrictInput):
    noteId: str = NoteIdField
    content: str = Field(min_length=1, description="Markdown to add, at most 50 KB.")
    heading: str | None = Field(default=None, max_length=500,
                                description="Append at the end of this section instead of the note.")
    separator: str = Field(default="\n\n", max_length=20)
    version: str | None = VersionField

    @model_validator(mode="after")
    def _check(self) -> AppendInput:
        _max_bytes(self.content, 50_000, "content")
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
        if "kms_provenance" in self.set or "kms_provenance" in self.remove:
            raise ValueError("the key kms_provenance is reserved")
        return self


class Position(StrictInput):
    afterHeading: str | None = Field(default=None, min_length=1, max_length=500)
    beforeHeading: str | None = Field(default=None, min_length=1, max_length=500)
    afterBlockContaining: str | None = Field(default=None, min_length=1, max_length=1000)
    atLine: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _exactly_one(self) -> Position:
        given = [k for k, v in self.model_dump().items() if v is not None]
        if len(given) != 1:
            raise ValueError("position needs exactly one of afterHeading, beforeHeading, afterBlockContaining, "
                             f"atLine (got {given or 'none'})")
        return self


class InsertAtInput(StrictInput):
    noteId: str = NoteIdField
    content: str = Field(min_length=1, description="Markdown to insert, at most 50 KB.")
    position: Position
    version: str | None = VersionField

    @model_validator(mode="after")
    def _check(self) -> InsertAtInput:
        _max_bytes(self.content, 50_000, "content")
        return self


class WriteOutput(ToolOutput):
    noteId: str | None  # None only if the file was written but re-indexing failed (see indexWarning)
    path: str
    bytesBefore: int
    bytesAfter: int
    linesAdded: int


class CreateOutput(WriteOutput):
    title: str


def _service(ctx: ToolContext) -> Any:
    service = ctx.services.get("writes")
    if service is None:
        raise KmsError("feature-disabled", "write tools are turned off for this session")
    return service


def _call(ctx: ToolContext, fn: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        result = fn(**kwargs)
    except KmsError as exc:
        exc.extra["_recorded"] = True  # the service already wrote the provenance row
        raise
    semantic = ctx.services.get("semantic")
    if semantic is not None:
        semantic.notify_changed()  # embed the new text in the background
    return result


def kms_create(ctx: ToolContext, args: CreateInput) -> dict[str, Any]:
    return _call(ctx, _service(ctx).create, title=args.title, content=args.content, tags=args.tags or None,
                 folder=args.folder, vault=args.vault)


def kms_append(ctx: ToolContext, args: AppendInput) -> dict[str, Any]:
    return _call(ctx, _service(ctx).append, note_id=args.noteId, content=args.content, heading=args.heading,
                 separator=args.separator, version=args.version)


def kms_update_properties(ctx: ToolContext, args: UpdatePropertiesInput) -> dict[str, Any]:
    return _call(ctx, _service(ctx).update_properties, note_id=args.noteId, set=args.set, remove=args.remove or None,
                 version=args.version)


def kms_insert_at(ctx: ToolContext, args: InsertAtInput) -> dict[str, Any]:
    position = {k: v for k, v in args.position.model_dump().items() if v is not None}
    return _call(ctx, _service(ctx).insert_at, note_id=args.noteId, content=args.content, position=position,
                 version=args.version)


def make_write_service(config: SessionConfig) -> Any:
    from server.activity.ratelimit import RateLimiter
    from server.writes.guard import WriteService

    limits = RateLimiter(per_minute=config.per_minute or None, per_session=config.per_session or None)
    return WriteService(config.db_path, config.session_id, limits, list(config.allowlist))


def record_refusal(config: SessionConfig, spec: ToolSpec, arguments: dict[str, Any], exc: KmsError) -> None:
    """Provenance for a write call refused before it reached the service."""
    note_id = arguments.get("noteId") if isinstance(arguments.get("noteId"), str) else None
    provenance.record(
        thread_connection(config.db_path), tool=spec.name, session_id=config.session_id,
        status=provenance.status_for(exc.kind), input_summary=provenance.summarize_input(arguments),
        note_id=note_id, title=arguments.get("title") if isinstance(arguments.get("title"), str) else None,
        error=exc.kind, message=exc.message,
    )


_RECOVER = ("Errors: not-found (check the noteId with kms_search), feature-disabled, rate-limited (wait "
            "retryAfterMs), conflict (kms_read again and retry), folder-denied (use an allowed folder), "
            "already-exists, invalid-input.")

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
        description="Insert Markdown at one place in a note: after or before a heading, after the paragraph "
                    "containing some text, or at a line number. Only adds. " + _RECOVER,
        input_model=InsertAtInput,
        output_model=WriteOutput,
        handler=kms_insert_at,
        annotations=ADD_ONLY.model_copy(update={"title": "Insert into a note"}),
    ),
]
