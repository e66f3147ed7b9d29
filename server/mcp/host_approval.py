"""Approving a staged write inside the agent's host: the dialog, the person's answer, the sealed request state.

When a write call is staged for approval (``server.writes.staging``, ``server.activity.approvals``) and the
session's ``write.approval_channel`` allows it, the adapter asks the person in the host too, if the client
declared form elicitation (``asks``): the tool, the notes with the lines added and removed, the first lines
of the diff (``staging.describe``), and a form: apply or reject, with an optional reason.

- On 2025-era connections the server asks inside the call (``elicitation/create``, ``elicit_form``) while it
  keeps polling the database; on 2026-07-28 the call answers an ``InputRequiredResult`` carrying the form and
  a sealed ``requestState``, and the host retries the call with the person's answer.
- An answer is a decision through the ``host`` channel (``approvals.decide``): the first decision wins, so the
  dashboard or ``kms approve`` deciding first makes the host's answer moot. ``cancel`` (the person dismissed
  the dialog, or a ``claude -p`` that cannot ask) leaves the call waiting for the dashboard as before.
- The request state (``ApprovalStates``) names the session, the staged call and what was shown, under an HMAC
  with a secret this process made at start; each one is good once. A state this process did not mint for this
  session, this call and these arguments is forged; one already used (or for a call no longer waiting here)
  is replayed: both answer ``invalid-input`` and change nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types

from server.activity.approvals import REASON_MAX
from server.errors import KmsError

APPLY, REJECT = "apply", "reject"
FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Apply this change?",
            "enum": [APPLY, REJECT],
            "enumNames": ["Apply it", "Reject it"],
            "default": APPLY,
        },
        "reason": {
            "type": "string",
            "title": "Reason (optional)",
            "description": "Told to the agent when you reject the change.",
            "maxLength": REASON_MAX,
        },
    },
    "required": ["decision"],
}
INPUT_KEY = "kms_approval"  # the key of the one input request an InputRequiredResult carries

Action = Literal["apply", "reject", "cancel"]


@dataclass(frozen=True)
class HostAnswer:
    """The person's answer in the host: apply, reject (with their reason) or cancel (leave it to the dashboard)."""

    action: Action
    reason: str | None = None


def answer_of(result: types.ElicitResult) -> HostAnswer:
    """The host's ``ElicitResult`` as a decision. ``decline`` is a rejection; an accepted form that does not say
    apply or reject is taken as no answer (``cancel``), never as consent."""
    content = result.content or {}
    reason = content.get("reason")
    why = reason.strip()[:REASON_MAX] or None if isinstance(reason, str) else None
    if result.action == "decline":
        return HostAnswer("reject", why or "declined in the host")
    if result.action == "accept" and content.get("decision") in (APPLY, REJECT):
        return HostAnswer("apply" if content["decision"] == APPLY else "reject", why)
    return HostAnswer("cancel")


def form_capable(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether the client declared form elicitation (an empty ``elicitation`` object means form, as before
    the modes were named)."""
    found = capabilities.elicitation if capabilities is not None else None
    return found is not None and (found.form is not None or found.url is None)


def asks(channel: str, capabilities: types.ClientCapabilities | None) -> bool:
    """Whether a staged call of a session with this ``write.approval_channel`` is put to the person in the host."""
    return channel in ("host", "both") and form_capable(capabilities)


def elicit_params(message: str) -> types.ElicitRequestFormParams:
    return types.ElicitRequestFormParams(message=message, requested_schema=FORM_SCHEMA)


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def forged(why: str) -> KmsError:
    return KmsError(
        "invalid-input",
        "this approval answer's request state was not issued for this call (forged or altered); nothing was "
        "changed. Call the tool again without requestState",
        problem="forged-request-state",
        detail=why,
    )


def replayed(pending_id: int) -> KmsError:
    return KmsError(
        "invalid-input",
        f"this approval answer's request state was already used (pending change #{pending_id}); nothing was "
        "changed. Call the tool again without requestState",
        problem="replayed-request-state",
        pendingId=pending_id,
    )


class ApprovalStates:
    """The request states this process minted and not yet redeemed (one per call waiting for the host's
    answer). Thread-safe; the secret lives and dies with the process."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)
        self._open: dict[int, str] = {}  # pending id -> the nonce of the one state that may still redeem it
        self._lock = threading.Lock()

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()

    def mint(self, *, session_id: str, pending_id: int, tool: str, arguments: Mapping[str, Any], shown: Any) -> str:
        """A state for the host to echo: bound to the session, the staged call, its tool and arguments and
        what the person was shown; good once."""
        nonce = secrets.token_hex(12)
        claims = {
            "s": session_id,
            "p": pending_id,
            "t": tool,
            "a": _digest(dict(arguments)),
            "f": _digest(shown),
            "n": nonce,
        }
        payload = json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()
        with self._lock:
            self._open[pending_id] = nonce
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def redeem(self, state: str, *, session_id: str, tool: str, arguments: Mapping[str, Any]) -> tuple[int, str]:
        """The staged call's id and the digest of what was shown, for a state this process minted for this
        session, tool and arguments, once; ``invalid-input`` (forged, replayed) otherwise, changing nothing."""
        try:
            body, mac = state.split(".", 1)
            payload, tag = _unb64(body), _unb64(mac)
        except (ValueError, TypeError):
            raise forged("malformed") from None
        if not hmac.compare_digest(tag, self._mac(payload)):
            raise forged("signature")
        claims = json.loads(payload)
        if claims.get("s") != session_id:
            raise forged("another session")
        if claims.get("t") != tool or claims.get("a") != _digest(dict(arguments)):
            raise forged("another call")
        pending_id = int(claims["p"])
        with self._lock:
            if self._open.get(pending_id) != claims.get("n"):
                raise replayed(pending_id)
            del self._open[pending_id]
        return pending_id, str(claims["f"])

    def drop(self, pending_id: int) -> None:
        """No state for this call may redeem any more (it ended)."""
        with self._lock:
            self._open.pop(pending_id, None)


def shown_digest(shown: Any) -> str:
    """The digest ``mint`` binds for what the person was shown (compared again at ``redeem``)."""
    return _digest(shown)
