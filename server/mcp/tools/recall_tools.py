"""``kms_recall`` (read tier): a token-budgeted context bundle about a topic (``server.index.recall``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from server.index.recall import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, recall
from server.mcp.tools.base import READ_ONLY, ReadSpec, StrictInput, ToolContext, ToolOutput
from server.mcp.tools.notes_tools import VaultField


class RecallInput(StrictInput):
    topic: str = Field(min_length=1, max_length=1000, description="What you need context about, in your own words.")
    budgetTokens: int = Field(
        default=DEFAULT_BUDGET,
        ge=MIN_BUDGET,
        le=MAX_BUDGET,
        description="Most tokens the items may take together (by their tokenEstimate).",
    )
    vault: str | None = VaultField
    kind: Literal["decision", "session", "note"] | None = Field(
        default=None,
        description="Only this kind of item: decision (decisions recorded in past sessions' notes or in notes "
        "with type: decision), session (past sessions' notes that touched the topic) or note (the other notes). "
        "Default: all three, in that order.",
    )


class ReadMore(BaseModel):
    noteId: str
    section: str | None


class RecallItem(BaseModel):
    noteId: str
    title: str
    path: str
    vault: str
    heading: str | None
    kind: Literal["decision", "session", "match", "section", "linked"]
    why: str
    text: str
    truncated: bool
    score: float
    readMore: ReadMore
    tokenEstimate: int
    session: str | None = Field(default=None, description="decision and session items: the session's id")
    date: str | None = Field(default=None, description="decision and session items: when the session started")
    project: str | None = Field(default=None, description="decision and session items: the session's project")
    thisProject: bool | None = Field(
        default=None, description="decision and session items: whether it is this session's project"
    )


class RecallOutput(ToolOutput):
    topic: str
    mode: Literal["hybrid", "keyword-only"]
    reason: str | None = None
    budgetTokens: int
    usedTokens: int
    omitted: int
    items: list[RecallItem]


def kms_recall(ctx: ToolContext, args: RecallInput) -> dict[str, Any]:

    ctx.require_index()
    vault_id = ctx.vault_filter(args.vault)
    if not args.topic.strip():
        return {
            "topic": args.topic,
            "mode": "keyword-only",
            "budgetTokens": args.budgetTokens,
            "usedTokens": 0,
            "omitted": 0,
            "items": [],
        }
    service = ctx.semantic
    index = None
    if service is not None:
        service.wait_first_call()
        index = service.index
    return recall(
        ctx.conn, args.topic, args.budgetTokens, vault_id, index, kind=args.kind, project=ctx.identity.project
    )


KMS_RECALL = ReadSpec(
    built_later=True,
    name="kms_recall",
    about=(
        "Gather context about a topic in one call, within a token budget (budgetTokens, default 4000): first "
        "the decisions past sessions recorded about it (kind decision: the decision, its session, date and "
        "project; this project's first), then the best-matching sections of the other notes a hybrid search "
        "finds (not whole notes), plus the notes they link to or are linked from, ranked and deduplicated, then "
        "the notes of past sessions that touched it (kind session). Use it before working on something the "
        "person may have notes about, instead of chaining search and read; kind keeps one of decision, session, "
        "note. Each item says why it is included and how to read more (readMore: kms_read's noteId and "
        "section); the items' tokenEstimate never add up to more than the budget."
    ),
    errors=("not-found", "no-index"),
    input_model=RecallInput,
    output_model=RecallOutput,
    handler=kms_recall,
    annotations=READ_ONLY.model_copy(update={"title": "Recall context"}),
    records_reads=True,
    note_text=True,
    example={"topic": "body"},
)
