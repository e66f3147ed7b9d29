"""One typed error for everything the core refuses, with a machine-readable kind.

Front ends turn it into their own shape: the MCP adapter into ``{"error": kind, ...}``,
the CLI into a red message and a non-zero exit.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pydantic only when a tool call is validated: the CLI and dashboard start without it
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")

KINDS = (
    "not-found",
    "invalid-input",
    "feature-disabled",
    "rate-limited",
    "conflict",
    "folder-denied",
    "already-exists",
    "too-broad",  # a call over write.max_files_per_call, refused before anything is touched
    "no-index",
    "database",  # the database cannot be opened or is damaged (server/store/health.py)
    "disk-full",  # no room left for the database or a note
    "paused",  # the person paused the session's writes (server/activity/control.py)
    "revoked",  # the person revoked the session's writes for good
    "rejected",  # the person rejected a call staged for approval (server/activity/approvals.py)
    "approval-timeout",  # nobody decided on a staged call within write.approval_timeout
    "cancelled",  # the host cancelled a staged call while it waited (or its server stopped)
)

# what an agent can do about each kind, in a few words ('' when the message says all): the "Errors: ..."
# sentence of every tool's description is rendered from these
RECOVERY: dict[str, str] = {
    "not-found": "",
    "invalid-input": "",
    "feature-disabled": "",
    "rate-limited": "wait retryAfterMs",
    "conflict": "kms_read again and retry; an open sync conflict waits for the person",
    "folder-denied": "use an allowed folder",
    "already-exists": "",
    "too-broad": "touch fewer notes per call",
    "no-index": "",
    "database": "",
    "disk-full": "",
    "paused": "the person paused this session's writes",
    "revoked": "the person stopped this session's writes",
    "rejected": "the person declined it: do not retry it unchanged",
    "approval-timeout": "",
    "cancelled": "",
}


def check_kinds(kinds: tuple[str, ...], owner: str) -> None:
    """``ValueError`` naming any kind that is not in ``KINDS`` (a tool may only promise kinds that exist)."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"{owner}: unknown error kinds {unknown}; the kinds are {', '.join(KINDS)}")


def errors_sentence(kinds: tuple[str, ...]) -> str:
    """'Errors: not-found (check the noteId with kms_search), ...' for ``kinds``, in ``KINDS`` order."""
    check_kinds(kinds, "errors_sentence")
    parts = [f"{k} ({RECOVERY[k]})" if RECOVERY[k] else k for k in KINDS if k in kinds]
    return "Errors: " + ", ".join(parts) + "." if parts else ""


class KmsError(Exception):
    def __init__(self, kind: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.extra = extra

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.kind, "message": self.message, **self.extra}


@functools.cache
def _valid_fields(model: type[BaseModel]) -> str:
    """'noteId (required), heading (optional), ...' as the tool's input schema names them (building
    a JSON schema walks the whole model, so it is done once per model, not once per refused call)."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    names = schema.get("properties", {})
    return ", ".join(f"{name} ({'required' if name in required else 'optional'})" for name in names)


HOST_INJECTED_ARGS = frozenset(
    {
        "wait_for_previous",  # Gemini CLI adds it to every tool's schema and sends it with each call
    }
)
"""Argument names agent hosts add to every tool call on their own: accepted and dropped before the strict
input model sees them (unless a tool really has a field of that name). Every other unknown name is refused.
docs/tools.md lists them."""


def validate_input(model: type[M], arguments: Mapping[str, Any]) -> M:
    """A tool's arguments through its strict input model; ``invalid-input`` naming every problem and
    the valid fields otherwise (read and write tools answer bad input the same way)."""
    # deferred: pydantic only to validate a call; kms --version and kms hook load this module
    from pydantic import ValidationError

    if not HOST_INJECTED_ARGS.isdisjoint(arguments):
        arguments = {k: v for k, v in arguments.items() if k not in HOST_INJECTED_ARGS or k in model.model_fields}
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in exc.errors()]
        raise KmsError("invalid-input", "; ".join(parts) + f". Valid fields: {_valid_fields(model)}") from None
