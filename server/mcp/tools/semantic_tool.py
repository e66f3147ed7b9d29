"""``kms_semantic_search`` (read tier): hybrid keyword + embedding search, backed by ``SemanticService``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from server.errors import KmsError
from server.index.properties import parse_filters, passing_ids
from server.index.search import MAX_LIMIT
from server.mcp.tools.base import READ_ONLY, ReadSpec, StrictInput, ToolContext, ToolOutput, WhereField
from server.mcp.tools.notes_tools import SearchHit


class SemanticSearchInput(StrictInput):
    query: str = Field(max_length=1000, description="A question or topic in your own words.")
    limit: int = Field(default=10, ge=1, le=50)
    vault: str | None = Field(default=None, min_length=1, max_length=64, description="Only this vault.")
    mode: Literal["hybrid", "semantic"] = Field(
        default="hybrid", description="hybrid (default) fuses keyword and meaning."
    )
    where: list[str] | None = WhereField


class SemanticHit(SearchHit):
    matchType: Literal["keyword", "semantic", "both"]
    heading: str | None = None


class SemanticSearchOutput(ToolOutput):
    query: str
    mode: Literal["hybrid", "semantic", "keyword-only"]
    reason: str | None = None
    hits: list[SemanticHit]


def kms_semantic_search(ctx: ToolContext, args: SemanticSearchInput) -> dict[str, Any]:
    where = parse_filters(args.where)
    if not args.query.strip():
        return {"query": args.query, "mode": args.mode, "hits": []}
    ctx.require_index()
    service = ctx.semantic
    if service is None:
        raise KmsError("feature-disabled", "semantic search is not available in this process; use kms_search")
    vault_id = ctx.vault_filter(args.vault)
    if not where:
        return service.search(ctx.conn, args.query, args.limit, vault_id, mode=args.mode)
    # the filters keep the best matches by meaning that pass them, among the most a search returns
    out = service.search(ctx.conn, args.query, MAX_LIMIT, vault_id, mode=args.mode)
    passing = passing_ids(ctx.conn, [h["noteId"] for h in out["hits"]], where)
    return {**out, "hits": [h for h in out["hits"] if h["noteId"] in passing][: args.limit]}


KMS_SEMANTIC_SEARCH = ReadSpec(
    name="kms_semantic_search",
    about=(
        "Search the person's notes by meaning: use it when the notes may say it in other words than your "
        'question ("how do we handle auth failures" finds "error categories in the login service"). '
        "Fuses keyword (BM25) and embedding similarity; each hit says matchType keyword/semantic/both and "
        "shows the best-matching section. If the model is not ready it answers keyword-only results and "
        "says why (mode, reason)."
    ),
    errors=("invalid-input", "not-found", "no-index"),
    input_model=SemanticSearchInput,
    output_model=SemanticSearchOutput,
    handler=kms_semantic_search,
    annotations=READ_ONLY.model_copy(update={"title": "Semantic search"}),
    note_text=True,
    example={"query": "body"},
)
