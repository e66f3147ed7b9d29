"""``kms_pending``: what became of this session's own staged writes.

A session whose writes are staged for the person without waiting (a remote grant: ``SessionConfig.review_detached``)
is answered ``{"status": "staged", "pendingId": N}`` at once; this read tells it later whether the person approved
it (and the call's result), rejected it (and why), or let it expire. Only the calling session's own items: another
session's id is as if absent. The rules are ``server.activity.approvals``' (``of_session``, ``agent_view``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from server.activity import approvals
from server.errors import KmsError
from server.mcp.service_state import session_pages
from server.mcp.tools.base import READ_ONLY, ReadSpec, StrictInput, ToolContext, ToolOutput


class PendingInput(StrictInput):
    pendingId: int | None = Field(
        default=None, ge=1, description="The pendingId a staged write answered; omit it for this session's latest."
    )
    limit: int = Field(default=10, ge=1, le=50, description="How many of this session's staged writes, newest first.")


class PendingOutput(ToolOutput):
    items: list[dict[str, Any]]


def kms_pending(ctx: ToolContext, args: PendingInput) -> dict[str, Any]:
    ctx.require_index()
    conn = ctx.conn
    items = approvals.of_session(conn, ctx.session_id, pending_id=args.pendingId, limit=args.limit)
    if args.pendingId is not None and not items:
        raise KmsError("not-found", f"this session staged no write #{args.pendingId}", pendingId=args.pendingId)
    pages = session_pages(ctx.config) if any(item.status == approvals.OPEN for item in items) else None
    return {"items": [approvals.agent_view(conn, item, pages) for item in items]}


KMS_PENDING = ReadSpec(
    name="kms_pending",
    about=(
        "What became of this session's writes that were staged for the person's review (a write answered "
        "status 'staged' with a pendingId): pending, approved (with the call's result), rejected (with the "
        "person's reason), expired or cancelled. Pass pendingId for one; omit it for the latest few."
    ),
    errors=("not-found", "no-index"),
    input_model=PendingInput,
    output_model=PendingOutput,
    handler=kms_pending,
    annotations=READ_ONLY.model_copy(update={"title": "Staged writes"}),
    example={},
)
