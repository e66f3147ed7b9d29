"""``kms_capture`` (write tier): the agent records the session's decisions, findings, next steps and links in
one call; they fill the sections of the session's note (``server.writes.capture``), written through the guard
like every write (provenance, revert, ``write.approval``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from server.mcp.tools.base import ADD_ONLY, REVERTIBLE, StrictInput, ToolOutput, WriteSpec
from server.writes.context import WriteContext
from server.writes.outcome import WriteOutcome

MAX_ITEM_CHARS = 500
MAX_ITEMS = 20
Item = Annotated[str, Field(min_length=1, max_length=MAX_ITEM_CHARS)]


def _items(what: str) -> list[str] | None:
    return Field(default=None, max_length=MAX_ITEMS, description=f"{what}: short items, one line each.")


class CaptureInput(StrictInput):
    decisions: list[Item] | None = _items("Decisions taken in this session, with their reason")
    findings: list[Item] | None = _items("What you found out that is worth keeping")
    nextSteps: list[Item] | None = _items("What is left to do (the next session of this project sees them)")
    links: list[Item] | None = _items("Notes (by title or path) or URLs this session's work relates to")

    @model_validator(mode="after")
    def _some(self) -> CaptureInput:
        if not (self.decisions or self.findings or self.nextSteps or self.links):
            raise ValueError("give at least one of decisions, findings, nextSteps, links")
        return self


class CaptureOutput(ToolOutput):
    noteId: str | None = None
    path: str | None = None
    captured: int


def kms_capture(ctx: WriteContext, args: CaptureInput) -> WriteOutcome:
    # deferred: the YAML editors at the first call, not on the way to tools/list (write_tools.OPERATIONS)
    from server.writes.capture import write_session_note

    items = [
        (kind, " ".join(text.split()))
        for kind, texts in (
            ("decision", args.decisions),
            ("finding", args.findings),
            ("next", args.nextSteps),
            ("link", args.links),
        )
        for text in texts or ()
    ]
    outcome = write_session_note(ctx, ctx.session_id, items)
    outcome.result["captured"] = len(items)  # type: ignore[typeddict-unknown-key]
    return outcome


KMS_CAPTURE = WriteSpec(
    name="kms_capture",
    tier="write",
    about=(
        "Record this session's decisions, findings, next steps and links in one call, before you finish or "
        "when something is settled: they go into this session's note (type: session, in the capture folder), "
        "which kms also fills with what the session read and changed. The next session of this project sees "
        f"the open next steps in kms_start. Call it again to add more; items are kept in order. {REVERTIBLE}"
    ),
    errors=("conflict", "folder-denied", "no-index"),
    input_model=CaptureInput,
    output_model=CaptureOutput,
    handler=kms_capture,
    annotations=ADD_ONLY.model_copy(update={"title": "Capture the session's decisions"}),
    example={"decisions": ["Keep the drafts folder"], "nextSteps": ["Tidy it"]},
    denied="the capture folder is its own entry (capture.folder), as the memory folder is kms_remember's",
)
