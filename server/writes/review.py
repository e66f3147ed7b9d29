"""The person's decision on a staged write call: one function for every front end.

``kms approve`` / ``kms reject``, the dashboard's pending pane and the service's review page all call
``decide_pending``; none of them decides another way, so a call is decided once, whichever front end is first
(``approvals.decide``: the check and the decision in one transaction; a second decider gets ``conflict`` naming
who decided and how).

What the decision then does depends on who waits for it:

- a call staged by a session that waits (``write.approval``'s blocking flow: the session's own server polls the
  row) is applied or refused by that server, as soon as it sees the decision; here it is only recorded;
- a **detached** call (``SessionConfig.review_detached``: nobody waits, the agent was answered at once) is applied
  right here, in the decider's process, through the write guard of its own session rebuilt from the row
  (``WriteService.for_detached``: the same identity, vault, tiers, allowlist and token folders) with the bytes
  the person was shown (``staging.Expected``): a note changed since answers ``conflict`` and nothing is written.
  Its provenance row names the original session as the writer, and the message says who approved it and where
  (``Pending.decided_words``). A rejected detached call gets its own refused row the same way.

kms's own session note (``server.writes.capture``), staged when the person approves writes, is a detached call
too (no process waits for it): deciding it here writes it (or records its refusal), as the ``capture`` actor.

A unit of several files is one staged call (one row, every file's diff in it), so deciding it decides the unit;
``decide_all`` decides several ids in one go.

The write tools' handlers live in the MCP adapter's registry, a layer above; the registry hands them down when
it is imported (``server.writes.appliers``), so a front end that decides a detached call imports
``server.mcp.tools`` (or passes ``tools``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import apsw

from server.activity import approvals
from server.errors import KmsError
from server.writes import (
    appliers,
    capture,  # noqa: F401 - provides kms's own session note (``appliers``) to decisions
)
from server.writes.guard import WriteService, WriteTool
from server.writes.held_call import Staged


def _tool_for(pending_id: int, name: str, tools: Mapping[str, WriteTool] | None) -> WriteTool:
    found = (tools.get(name) if tools is not None else None) or appliers.named(name)
    if found is None:
        raise KmsError(
            "invalid-input",
            f"pending change #{pending_id} calls {name}, which this kms cannot apply (no such write tool); "
            "nothing was decided",
            id=pending_id,
        )
    return found


def decide_pending(
    conn: apsw.Connection,
    pending_id: int,
    approve: bool,
    *,
    channel: str,
    reason: str = "",
    decider: str = "person",
    tools: Mapping[str, WriteTool] | None = None,
) -> dict[str, Any]:
    """Approve or reject staged call ``pending_id`` through ``channel`` (``approvals.CHANNELS``) and, for a
    detached call, apply or refuse it now; the answer says what happened (``applied``: the call's result,
    ``None`` while a waiting session applies it). ``not-found`` for an unknown id; ``conflict`` when another
    decision came first or, approving a detached call, when a note changed since it was shown (nothing
    written; the row keeps ``outcome = conflict``). ``tools``: the write tools by name (default: the
    registry's, ``appliers``)."""
    found = approvals.head(conn, pending_id)  # (not the whole row: a unit's diffs are decoded once, deciding)
    if found is None:
        raise KmsError("not-found", f"no pending change #{pending_id}; `kms pending` lists them", id=pending_id)
    name, status, detached = found
    tool = _tool_for(pending_id, name, tools) if detached and status == approvals.OPEN else None
    decided = approvals.decide(conn, pending_id, approve=approve, reason=reason, channel=channel, decider=decider)
    answer: dict[str, Any] = {
        "id": decided.id,
        "status": decided.status,
        "tool": decided.tool,
        "sessionId": decided.session_id,
        "channel": decided.channel,
        "decider": decided.decider,
        "reason": decided.reason,
        "detached": decided.detached,
        "applied": None,
    }
    if tool is None:  # the session that staged it waits for this decision and acts on it
        return answer
    service = WriteService.for_detached(decided, conn.filename, actor=appliers.actor_of(decided.tool))
    try:
        result = service.settle(tool, decided.arguments, Staged.of(decided), decided)
    except KmsError as e:
        if e.kind == "rejected" and not approve:
            return {**answer, "outcome": "rejected"}
        raise KmsError(
            e.kind, f"pending change #{pending_id} was approved but not applied: {e.message}", id=pending_id, **e.extra
        ) from None
    finally:
        service.session.close()
    return {**answer, "outcome": "applied", "applied": result}


def decide_all(
    conn: apsw.Connection,
    pending_ids: Iterable[int],
    approve: bool,
    *,
    channel: str,
    reason: str = "",
    decider: str = "person",
    tools: Mapping[str, WriteTool] | None = None,
) -> list[dict[str, Any]]:
    """``decide_pending`` for each id in turn; one that cannot be decided answers its error (``{"id", "error",
    "message"}``) and the others go on (a unit is one id: every file it changes decided at once)."""
    out: list[dict[str, Any]] = []
    for pid in pending_ids:
        try:
            out.append(decide_pending(conn, pid, approve, channel=channel, reason=reason, decider=decider, tools=tools))
        except KmsError as e:
            out.append({"id": pid, **e.to_dict()})
    return out
