"""The edit tier: ``kms_edit`` (correct or delete text in a note's body), its spec beside its handler, and
``EDIT_TOOLS``, the tier's tools in listing order.

Run by the write guard (``server.writes.guard``) like every write tool: the edit tier's gate, this
module's strict input, the rate limit, the operation (``server.writes.edits``), one provenance row with
the change, which the dashboard and ``kms revert`` undo.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from server.mcp.tools.base import DESTRUCTIVE, REVERTIBLE, Denied, NoteIdField, StrictInput, ToolOutput, WriteSpec
from server.writes.context import WriteContext
from server.writes.limits import MAX_HEADING_CHARS, MAX_INSERT_BYTES, check_bytes, kb
from server.writes.outcome import WriteOutcome

MAX_EDITS = 50


class Replace(StrictInput):
    old: str = Field(min_length=1, description="Text that occurs exactly once in the body (quote enough of it).")
    new: str = Field(description="What replaces it; empty deletes it.")


class ReplaceSection(StrictInput):
    heading: str = Field(min_length=1, max_length=MAX_HEADING_CHARS, description="'Tasks' or '## Tasks'.")
    content: str = Field(description="The section's new content (the heading line stays); empty empties it.")


class EditStep(StrictInput):
    replace: Replace | None = None
    replaceSection: ReplaceSection | None = None
    prepend: str | None = Field(
        default=None, min_length=1, description="Markdown put at the top of the body (after frontmatter and summary)."
    )
    replaceBody: str | None = Field(
        default=None,
        description="The whole new body (frontmatter and summary stay); "
        "what kms_read gave as body, rewritten. Empty empties it.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> EditStep:
        kinds = ("replace", "replaceSection", "prepend", "replaceBody")
        given = [k for k in kinds if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"each edit needs exactly one of {', '.join(kinds)} (got {given or 'none'})")
        for text in (
            self.replace.old if self.replace else "",
            self.replace.new if self.replace else "",
            self.replaceSection.content if self.replaceSection else "",
            self.prepend or "",
            self.replaceBody or "",
        ):
            check_bytes(text, MAX_INSERT_BYTES, "edit text")
        return self


class EditInput(StrictInput):
    noteId: str = NoteIdField
    version: str = Field(pattern=r"^[0-9a-f]{64}$", description="The `version` kms_read returned (required).")
    edits: list[EditStep] = Field(min_length=1, max_length=MAX_EDITS, description="Applied in order, all or nothing.")


class EditOutput(ToolOutput):
    noteId: str | None
    path: str
    version: str
    linesRemoved: int
    linesAdded: int
    bytesBefore: int
    bytesAfter: int


def kms_edit(ctx: WriteContext, args: EditInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call, not on the way to tools/list (write_tools.OPERATIONS)
    from server.writes import edits

    note, vault = ctx.note(args.noteId)
    steps = [s.model_dump(exclude_none=True) for s in args.edits]
    return edits.edit(ctx, vault, note, version=args.version, edits=steps)


KMS_EDIT = WriteSpec(
    name="kms_edit",
    tier="edit",
    about="Correct or delete text in a note's body: a list of edits applied in order, all or nothing, "
    "only if the note is still the `version` kms_read gave. replace {old, new} (old must occur "
    "exactly once; new may be empty), replaceSection {heading, content} (up to the next heading "
    "of the same or a higher level), prepend (after frontmatter and summary), replaceBody (the "
    "whole body kms_read gave, rewritten; frontmatter and summary stay). Not for "
    "frontmatter (kms_update_properties) nor for only adding (kms_append, kms_insert_at). "
    f"At most {MAX_EDITS} edits of {kb(MAX_INSERT_BYTES)}. Returns lines removed and added, "
    f"bytes before and after and the new version. {REVERTIBLE}",
    errors=("not-found", "conflict", "folder-denied"),
    input_model=EditInput,
    output_model=EditOutput,
    handler=kms_edit,
    annotations=DESTRUCTIVE.model_copy(update={"title": "Edit a note"}),
    example={"noteId": "drafts/edit.md", "version": "0" * 64, "edits": [{"prepend": "x"}]},
    denied=Denied(
        {"noteId": "drafts/sub/edit.md", "version": "0" * 64, "edits": [{"prepend": "x"}]}, "drafts/sub/edit.md"
    ),
)

# the edit tier, in listing order
EDIT_TOOLS: tuple[WriteSpec, ...] = (KMS_EDIT,)
