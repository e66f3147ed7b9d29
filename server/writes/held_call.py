"""A write call held for the person's decision: its ticket, the answer a detached one gets at once, the refusal
it ends in when not approved, and which text is held whatever the review mode (planted instructions).

Its own room because both sides of the wait use it: the guard (``server.writes.guard``) stages and settles a
call, while the MCP adapter (``server.mcp.approval_flow``), the person's decision (``server.writes.review``)
and kms's session capture (``server.writes.capture``) only hold and pass on the ticket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from server.activity import approvals, idempotency, review_access
from server.errors import KmsError
from server.vault.planted import looks_like_instructions, strings_in
from server.writes.staging import StagedFile

# arguments that are not text a write puts in a note (the rest, titles and paths included, are looked at)
NOT_NOTE_TEXT = frozenset({idempotency.KEY_FIELD, "version", "vault", "noteId"})


def planted_reasons(arguments: Mapping[str, Any]) -> list[str]:
    """Why the text a write call would put in a note looks like instructions to an agent (empty: it does
    not). Every write tool's arguments go through it, whatever their names: a new tool is covered too."""
    return looks_like_instructions("\n".join(strings_in(dict(arguments), NOT_NOTE_TEXT)))


POLL_S = 0.1  # how often a waiting call looks at the person's decision (the answer comes within 0.5 s)


@dataclass(frozen=True)
class Staged:
    """A call waiting for the person: its ``pending_writes`` id and the files it was shown to change."""

    id: int
    files: tuple[StagedFile, ...]
    expires_at: float
    why: tuple[str, ...] = ()  # staged because its text looks planted (``planted_reasons``)
    detached: bool = False  # nobody waits on it: answered at once, applied by the person's decision

    @classmethod
    def of(cls, item: approvals.Pending) -> Staged:
        """The ticket of a staged call as its row keeps it (a decider in another process applies it)."""
        files = tuple(StagedFile.from_json(f) for f in item.files)
        return cls(item.id, files, item.expires_at, tuple(item.why), item.detached)


def staged_answer(staged: Staged, pages: str | None = None) -> dict[str, Any]:
    """A detached call's answer, given at once: staged, its pending id, how the person reviews it (``pages``: the
    review pages' address, when a service serves them: the item's own URL is in the answer, ``reviewUrl``) and
    what it would change (a hidden note counted, never named). ``kms_pending`` tells the agent what became of it."""
    shown = [
        {
            "vault": f.vault,
            "path": f.path,
            **({"newPath": f.new_path} if f.new_path else {}),
            "added": f.added,
            "removed": f.removed,
        }
        for f in staged.files
        if not f.hidden
    ]
    hidden = sum(1 for f in staged.files if f.hidden)
    return {
        "status": "staged",
        "pendingId": staged.id,
        "review": approvals.review_hint(staged.id, pages),
        **({"reviewUrl": review_access.item_url(pages, staged.id)} if pages else {}),
        "message": f"staged for the person's review, nothing written yet; ask kms_pending with pendingId "
        f"{staged.id} what became of it",
        "files": shown,
        **({"hiddenFiles": hidden} if hidden else {}),
        "expiresAt": staged.expires_at,
        **({"why": list(staged.why)} if staged.why else {}),
    }


def refusal(staged: Staged, decision: approvals.Pending, approval_timeout: float) -> KmsError:
    """What a staged call the person did not approve (rejected, or not decided in time) answers: nothing was
    written, and, when it was held for its planted text, why the person was asked."""
    if decision.status == "rejected":
        why = f": {decision.reason}" if decision.reason else ""
        err = KmsError(
            "rejected",
            f"the person rejected this change{why}; nothing was written",
            pendingId=staged.id,
            reason=decision.reason,
        )
    else:
        err = KmsError(
            "approval-timeout",
            f"the person did not decide within {approval_timeout:g} s "
            "(write.approval_timeout); nothing was written. Ask them to look at the dashboard's "
            "pending pane, or retry later",
            pendingId=staged.id,
        )
    if staged.why:  # the agent learns why the person was asked, not only that they said no
        err.message += (
            f" (it was held for the person because its text looks like instructions to an agent: "
            f"{'; '.join(staged.why)})"
        )
        err.extra["why"] = list(staged.why)
    return err
