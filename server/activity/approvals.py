"""Write calls staged for the person's approval (``pending_writes``, m013), and the person's decisions.

The write guard stages a call (``stage``) with the exact per-file diff it would apply; the server
that staged it polls ``poll`` until the person decides (dashboard, ``kms approve`` / ``kms reject``:
``decide``) or the call's time runs out (``expired``); then the guard applies it, or refuses it, and
``finish`` links the call's own provenance row. Every decision is a provenance row of its own,
actor ``person`` (tool ``approve`` or ``reject``, the reason as its message), and names its channel
(``CHANNELS``: the host's own dialog, the dashboard, the CLI) there and in the staged row. The first
decision wins: a later one, through any channel, is ``conflict``. The database carries all of it between
processes: the dashboard and the CLI never talk to a server directly.

A detached call (``stage(..., session=...)``, m044: its session nobody waits in) is not polled by anyone: the
front ends decide through ``server.writes.review.decide_pending``, which applies it; the agent reads what became
of it through ``of_session`` / ``agent_view`` (``kms_pending``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

import apsw

from server.activity import provenance, review_access
from server.errors import KmsError
from server.store.db import rows, shared_commit, write_tx

OPEN = "pending"
DECIDED = ("approved", "rejected", "expired", "cancelled")
REASON_MAX = 500
# where the person decided: the agent's host asked them (MCP elicitation), the dashboard, `kms approve`/`reject`,
# the service's review page
CHANNELS = ("host", "dashboard", "cli", "web")
CHANNEL_WORDS = {
    "host": "in the host",
    "dashboard": "in the dashboard",
    "cli": "with the kms command",
    "web": "on the review page",
}
DECIDER_MAX = 200
# How long a detached staged call (``SessionConfig.review_detached``) waits for the person. Nobody's call waits
# on it, so ``write.approval_timeout`` (what an agent's call may wait) does not fit: a remote agent's write must
# survive the person being away for a weekend, yet a queue must not grow for ever. Then it is ``expired``.
DETACHED_WAIT_S = 7 * 86_400


def review_hint(pending_id: int, pages: str | None = None) -> str:
    """How the person reviews a staged call, as a staged call's answer tells the agent (to pass on): the one
    place that composes it. ``pages``: the review pages' address when a service serves them (its item's URL is
    named first: the agent can tell the person where to look); None: how to open them."""
    others = (
        f"the kms dashboard's pending pane, or `kms pending` then `kms approve {pending_id}` / "
        f"`kms reject {pending_id}`"
    )
    if pages:
        return (
            f"pending change #{pending_id} waits for the person at {review_access.item_url(pages, pending_id)} "
            f"(the review page: signed in once with `kms review`, or a device paired with `kms review pair`), "
            f"or {others}"
        )
    return (
        f"pending change #{pending_id} waits for the person: the review page (`kms review` opens it; on a "
        f"paired phone, the remote address's /review/), {others}"
    )


@dataclass(frozen=True)
class Pending:
    """One staged call, as the person sees it."""

    id: int
    created_at: float
    expires_at: float
    session_id: str
    tool: str
    input_summary: str
    arguments: dict[str, Any]
    files: list[dict[str, Any]]  # server.writes.staging.StagedFile.to_json()
    lines: int
    status: str
    decided_at: float | None
    reason: str | None
    invocation_id: int | None
    outcome: str | None
    why: list[str]  # why it was staged although write.approval did not ask: it looks planted (m029)
    channel: str | None = None  # where the person decided (``CHANNELS``), once decided
    asking_host: bool = False  # the agent's host is asking the person now (``write.approval_channel = host``)
    detached: bool = False  # nobody waits on it: the decision applies it (``server.writes.review``, m044)
    session: dict[str, Any] | None = None  # a detached call's session (``SessionConfig.snapshot``)
    decider: str | None = None  # who decided, once decided ("person", or a named device)

    def decided_words(self) -> str:
        """'approved by the person in the host (pending #3)': the decided call's own provenance message."""
        where = f" {CHANNEL_WORDS[self.channel]}" if self.channel in CHANNEL_WORDS else ""
        who = self.decider or "the person"
        who = "the person" if who == "person" else who
        return f"{self.status} by {who}{where} (pending #{self.id})"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
            "sessionId": self.session_id,
            "tool": self.tool,
            "input": self.arguments,
            "inputSummary": self.input_summary,
            "files": self.files,
            "lines": self.lines,
            "status": self.status,
            "decidedAt": self.decided_at,
            "reason": self.reason,
            "invocationId": self.invocation_id,
            "outcome": self.outcome,
            "channel": self.channel,
            "askingHost": self.asking_host,
            "why": self.why,
            "detached": self.detached,
            "decider": self.decider,
        }


def _pending(d: dict[str, Any]) -> Pending:
    return Pending(
        d["id"],
        d["created_at"],
        d["expires_at"],
        d["session_id"],
        d["tool"],
        d["input_summary"],
        json.loads(d["input_json"]),
        json.loads(d["files_json"]),
        d["lines"],
        d["status"],
        d["decided_at"],
        d["reason"],
        d["invocation_id"],
        d["outcome"],
        json.loads(d["why"]) if d.get("why") else [],
        d.get("channel"),
        bool(d.get("asking_host")),
        bool(d.get("detached")),
        json.loads(d["session_json"]) if d.get("session_json") else None,
        d.get("decider"),
    )


def stage(
    conn: apsw.Connection,
    *,
    session_id: str,
    tool: str,
    arguments: dict[str, Any],
    input_summary: str,
    files: list[dict[str, Any]],
    lines: int,
    timeout_s: float,
    now: float | None = None,
    asking_host: bool = False,
    why: list[str] | None = None,
    session: dict[str, Any] | None = None,
) -> int:
    """Record a call waiting for the person (``asking_host``: the agent's host asks them too); return its id.
    ``why``: the reasons a call the approval mode would let through is staged anyway (its text looks like
    planted instructions). ``session``: the session of a detached call (``SessionConfig.snapshot``), which the
    person's decision applies in whatever process it is made."""
    at = time.time() if now is None else now
    with write_tx(conn):
        conn.execute(
            "INSERT INTO pending_writes (created_at, expires_at, session_id, tool, input_summary, input_json,"
            " files_json, lines, asking_host, why, detached, session_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                at,
                at + timeout_s,
                session_id,
                tool,
                input_summary,
                _arguments_json(arguments),
                json.dumps(files, ensure_ascii=False),
                lines,
                int(asking_host),
                json.dumps(why, ensure_ascii=False) if why else None,
                int(session is not None),
                json.dumps(session, ensure_ascii=False, default=str) if session is not None else None,
            ),
        )
        return int(conn.last_insert_rowid())


def _arguments_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False, default=str)


def waiting_same(conn: apsw.Connection, session_id: str, tool: str, arguments: dict[str, Any]) -> Pending | None:
    """A call of this session with exactly these arguments still waiting (a detached call's retry carrying the
    same ``idempotencyKey`` is answered with it, not staged twice)."""
    found = rows(
        conn,
        "SELECT * FROM pending_writes WHERE session_id = ? AND status = ? AND tool = ? AND input_json = ?"
        " ORDER BY id DESC LIMIT 1",
        (session_id, OPEN, tool, _arguments_json(arguments)),
    )
    return _pending(found[0]) if found else None


def get(conn: apsw.Connection, pending_id: int) -> Pending | None:
    found = rows(conn, "SELECT * FROM pending_writes WHERE id = ?", (pending_id,))
    return _pending(found[0]) if found else None


def head(conn: apsw.Connection, pending_id: int) -> tuple[str, str, bool] | None:
    """(tool, status, detached) of a staged call, None for an unknown id: what a decider looks at before
    deciding, without decoding the call's arguments and diffs (``get``)."""
    found = conn.execute("SELECT tool, status, detached FROM pending_writes WHERE id = ?", (pending_id,)).fetchall()
    return (str(found[0][0]), str(found[0][1]), bool(found[0][2])) if found else None


LIST_LIMIT = 200  # the most waiting calls listed at once (the dashboard's pane, `kms pending`)


def list_pending(
    conn: apsw.Connection, *, status: str | None = OPEN, limit: int = LIST_LIMIT, now: float | None = None
) -> list[Pending]:
    """Oldest first (the one waiting longest at the top); a waiting call past its time is left out (its
    server turns it ``expired``; one whose server died never will). ``status=None``: every row, newest first."""
    if status is None:
        return [_pending(r) for r in rows(conn, "SELECT * FROM pending_writes ORDER BY id DESC LIMIT ?", (limit,))]
    at = time.time() if now is None else now
    cutoff = at if status == OPEN else float("-inf")
    return [
        _pending(r)
        for r in rows(
            conn,
            "SELECT * FROM pending_writes WHERE status = ? AND expires_at > ? ORDER BY id LIMIT ?",
            (status, cutoff, limit),
        )
    ]


def open_newest(
    conn: apsw.Connection, *, limit: int = LIST_LIMIT, before_id: int | None = None, now: float | None = None
) -> list[Pending]:
    """Waiting calls newest first (the review page's queue: the newest is what the person just caused), ``limit``
    at a time, older than ``before_id`` when paging back; from the (status, id) index."""
    at = time.time() if now is None else now
    return [
        _pending(r)
        for r in rows(
            conn,
            "SELECT * FROM pending_writes WHERE status = ? AND expires_at > ? AND id < ? ORDER BY id DESC LIMIT ?",
            (OPEN, at, before_id if before_id is not None else 2**62, limit),
        )
    ]


def open_ids(conn: apsw.Connection, *, now: float | None = None) -> tuple[int, ...]:
    """The ids ``list_pending`` would answer, from the (status, id) index alone: the dashboard's poll
    looks at these every tick and reads the staged calls (their diffs and inputs) only when they change."""
    at = time.time() if now is None else now
    return tuple(
        r[0]
        for r in conn.execute(
            "SELECT id FROM pending_writes WHERE status = ? AND expires_at > ? ORDER BY id LIMIT ?",
            (OPEN, at, LIST_LIMIT),
        )
    )


def asking_ids(conn: apsw.Connection) -> tuple[int, ...]:
    """The waiting calls the agent's host is asking the person about now (the dashboard's bell waits for them)."""
    return tuple(
        r[0]
        for r in conn.execute(
            "SELECT id FROM pending_writes WHERE status = ? AND asking_host = 1 ORDER BY id LIMIT ?", (OPEN, LIST_LIMIT)
        )
    )


def set_asking(conn: apsw.Connection, pending_id: int, asking: bool) -> None:
    """The host started (or stopped) asking the person about a waiting call."""
    with write_tx(conn):
        conn.execute(
            "UPDATE pending_writes SET asking_host = ? WHERE id = ? AND status = ?", (int(asking), pending_id, OPEN)
        )


def count_open(conn: apsw.Connection, *, now: float | None = None) -> int:
    """How many calls wait for the person (the dashboard's badge, ``kms doctor``)."""
    at = time.time() if now is None else now
    return int(
        next(
            iter(conn.execute("SELECT count(*) FROM pending_writes WHERE status = 'pending' AND expires_at > ?", (at,)))
        )[0]
    )


def latest_id(conn: apsw.Connection) -> int:
    """The newest staged call's id (the dashboard's poller compares it to ring the bell once per call)."""
    return int(next(iter(conn.execute("SELECT coalesce(max(id), 0) FROM pending_writes")))[0])


def decide(
    conn: apsw.Connection,
    pending_id: int,
    *,
    approve: bool,
    reason: str | None = None,
    now: float | None = None,
    channel: str = "cli",
    decider: str = "person",
) -> Pending:
    """The person's decision on a waiting call through ``channel``, recorded in provenance; ``not-found`` for an
    unknown id, ``conflict`` for one that is no longer waiting (decided, expired or ended: the first decision
    wins, whichever channel it came through, and the conflict says who decided it and how). ``decider``: who
    decided ("person", or a name the channel knows them by, such as a paired device's)."""
    if channel not in CHANNELS:
        raise ValueError(f"a decision's channel is one of {CHANNELS}, not {channel!r}")
    at = time.time() if now is None else now
    reason = (reason or "").strip()[:REASON_MAX] or None
    decider = (decider or "person").strip()[:DECIDER_MAX] or "person"
    with shared_commit(conn), write_tx(conn):  # the check, the decision row and the status: one transaction
        item = get(conn, pending_id)
        if item is None:
            raise KmsError("not-found", f"no pending change #{pending_id}; `kms pending` lists them", id=pending_id)
        if item.status != OPEN or at >= item.expires_at:
            state = item.status if item.status != OPEN else "expired"
            by = f", {item.decided_words().split(' (pending')[0]}" if state in ("approved", "rejected") else ""
            raise KmsError(
                "conflict",
                f"pending change #{pending_id} is no longer waiting ({state}{by}); nothing was changed",
                id=pending_id,
                status=state,
                channel=item.channel,
                decider=item.decider,
            )
        first = item.files[0] if item.files else {}
        verb = "approve" if approve else "reject"
        decision = provenance.record(
            conn,
            tool=verb,
            session_id=item.session_id,
            status="success",
            actor="person",
            input_summary=f"pending=#{pending_id} tool={item.tool} channel={channel}"
            + (f" decider={decider}" if decider != "person" else ""),
            vault=first.get("vault"),
            path=None if first.get("hidden") else first.get("path"),
            message=f"{'approved' if approve else 'rejected'} by "
            f"{'the person' if decider == 'person' else decider} {CHANNEL_WORDS[channel]}"
            + (f": {reason}" if reason else ""),
            at=at,
        )
        status = "approved" if approve else "rejected"
        conn.execute(
            "UPDATE pending_writes SET status = ?, decided_at = ?, reason = ?, decision_id = ?, channel = ?,"
            " decider = ? WHERE id = ?",
            (status, at, reason, decision, channel, decider, pending_id),
        )
    # the row as the UPDATE left it, without reading (and decoding: a unit's diffs may be large) it again
    return dataclasses.replace(item, status=status, decided_at=at, reason=reason, channel=channel, decider=decider)


def poll(conn: apsw.Connection, pending_id: int, *, now: float | None = None) -> Pending:
    """The call's row as it is now; a waiting one past its time becomes ``expired`` (once, here)."""
    at = time.time() if now is None else now
    item = get(conn, pending_id)
    if item is None:
        raise KmsError("not-found", f"pending change #{pending_id} is gone", id=pending_id)
    if item.status == OPEN and at >= item.expires_at:
        with write_tx(conn):
            conn.execute(
                "UPDATE pending_writes SET status = 'expired', decided_at = ? WHERE id = ? AND status = ?",
                (at, pending_id, OPEN),
            )
        found = get(conn, pending_id)
        assert found is not None
        return found
    return item


def cancel(conn: apsw.Connection, pending_id: int, *, now: float | None = None) -> bool:
    """The waiting call went away (its host cancelled it, its server stopped): no decision can land any more.
    True if it was still waiting."""
    at = time.time() if now is None else now
    with write_tx(conn):
        conn.execute(
            "UPDATE pending_writes SET status = 'cancelled', decided_at = ? WHERE id = ? AND status = ?",
            (at, pending_id, OPEN),
        )
        return conn.changes() > 0


def finish(conn: apsw.Connection, pending_id: int, *, invocation_id: int | None, outcome: str) -> None:
    """Link the call's own provenance row and say how it ended (``applied`` or an error kind)."""
    with write_tx(conn):
        conn.execute(
            "UPDATE pending_writes SET invocation_id = ?, outcome = ? WHERE id = ?",
            (invocation_id, outcome, pending_id),
        )


def reject_session(
    conn: apsw.Connection, session_id: str, reason: str, *, now: float | None = None, channel: str = "cli"
) -> int:
    """Reject every call of a session still waiting (a revoke through ``channel``); returns how many."""
    ids = [
        int(r[0])
        for r in conn.execute("SELECT id FROM pending_writes WHERE session_id = ? AND status = ?", (session_id, OPEN))
    ]
    done = 0
    for pid in ids:
        try:
            decide(conn, pid, approve=False, reason=reason, now=now, channel=channel)
            done += 1
        except KmsError:  # decided or expired meanwhile
            continue
    return done


def of_session(
    conn: apsw.Connection, session_id: str, *, pending_id: int | None = None, limit: int = 20, now: float | None = None
) -> list[Pending]:
    """A session's own staged calls, newest first (or the one ``pending_id``, if it is this session's: another
    session's is as if absent); a waiting one past its time is turned ``expired`` here (``poll``)."""
    if pending_id is not None:
        found = rows(conn, "SELECT id FROM pending_writes WHERE id = ? AND session_id = ?", (pending_id, session_id))
    else:
        found = rows(
            conn,
            "SELECT id FROM pending_writes WHERE session_id = ? ORDER BY id DESC LIMIT ?",
            (session_id, limit),
        )
    return [poll(conn, int(r["id"]), now=now) for r in found]


def agent_view(conn: apsw.Connection, item: Pending, pages: str | None = None) -> dict[str, Any]:
    """What the agent that staged ``item`` may learn of it (``kms_pending``): its state, the person's reason,
    how it ended and, once applied, the call's own result row. A note hidden from agents is counted, never
    named. ``pages``: the review pages' address; a waiting item names its page there (``reviewUrl``)."""
    shown = [f for f in item.files if not f.get("hidden")]
    out: dict[str, Any] = {
        "pendingId": item.id,
        "tool": item.tool,
        "status": item.status,
        "createdAt": item.created_at,
        "expiresAt": item.expires_at,
        "decidedAt": item.decided_at,
        "files": [
            {k: f[k] for k in ("vault", "path", "newPath", "added", "removed") if f.get(k) is not None} for f in shown
        ],
    }
    if len(shown) < len(item.files):
        out["hiddenFiles"] = len(item.files) - len(shown)
    if item.status in ("approved", "rejected"):
        out["decidedBy"] = item.decided_words().split(" (pending")[0]
    if item.reason:
        out["reason"] = item.reason
    if item.outcome:
        out["outcome"] = item.outcome
    if item.invocation_id is not None:
        found = rows(
            conn,
            "SELECT id, status, error, message, note_id, vault, path FROM tool_invocations WHERE id = ?",
            (item.invocation_id,),
        )
        if found:
            r = found[0]
            visible = any(f.get("path") == r["path"] or f.get("newPath") == r["path"] for f in shown)
            out["result"] = {
                "invocationId": r["id"],
                "status": r["status"],
                **({"error": r["error"]} if r["error"] else {}),
                **({"message": r["message"]} if r["message"] else {}),
                **({"noteId": r["note_id"], "vault": r["vault"], "path": r["path"]} if visible and r["path"] else {}),
            }
    out["message"] = _in_words(item, pages)
    if item.status == OPEN and pages:
        out["reviewUrl"] = review_access.item_url(pages, item.id)
    return out


def _in_words(item: Pending, pages: str | None = None) -> str:
    if item.status == OPEN:
        return f"waiting for the person's review ({review_hint(item.id, pages)})"
    if item.status == "approved":
        if item.outcome == "applied":
            return "approved and applied"
        if item.outcome:
            return f"approved, but it could not be applied ({item.outcome}); nothing was written"
        return "approved; being applied"
    if item.status == "rejected":
        return "rejected by the person; nothing was written" + (f": {item.reason}" if item.reason else "")
    if item.status == "expired":
        return "nobody decided in time; nothing was written"
    return "cancelled; nothing was written"
