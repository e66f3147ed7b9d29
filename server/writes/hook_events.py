"""What kms does at each event an agent host reports through its hooks (Claude Code's), for one session.

One function, ``handle``, for both ways an event arrives: an HTTP hook to the service (``server.mcp.http``,
the session from its bearer token) and a command hook (``kms hook EVENT``, the session from the contract
``kms claude`` wrote, else from the environment). It answers the JSON object the host reads back, or None.

- SessionStart: the start brief (``server.activity.brief``) as ``additionalContext``.
- every other event: what it carries for the session note (``session_material.record_event``); the prompt
  only when ``capture.prompts`` is on; a host file tool's call (PostToolUse) as a file changed outside kms.
- PreCompact and SessionEnd: the session note is written or updated (``capture.capture``).
- Stop: the ``capture.ask_agent`` rule: a session that changed at least that many notes and called no
  ``kms_capture`` is asked once (``{"decision": "block", "reason": ...}``: the host gives the model one
  more turn); never when the host says a Stop hook is already active, never twice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import apsw

from server.activity import session_material
from server.activity.session_note import CAPTURE_TOOL
from server.activity.session_registry import end_session, touch_session
from server.config.session_contract import SessionConfig

EVENTS: dict[str, str] = {  # the command's argument -> the host's event name
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "post-tool-use": "PostToolUse",
    "pre-compact": "PreCompact",
    "post-compact": "PostCompact",
    "stop": "Stop",
    "session-end": "SessionEnd",
}
CAPTURE_AT = ("PreCompact", "SessionEnd")
ASK_REASON = (
    "Before you stop: this session changed {n} note(s) in the person's notes and recorded no decisions. "
    "Call kms_capture once with the decisions you took, what you found and the next steps (short items), "
    "so the session note keeps them; then finish."
)


def handle(
    conn: apsw.Connection,
    config: SessionConfig,
    event: Mapping[str, Any],
    *,
    now: float | None = None,
) -> dict[str, Any] | None:
    """Do what ``event`` asks of kms for ``config``'s session; the host's answer, or None. A session note
    the person must approve is left staged: their decision writes it, and nothing waits for it here."""
    name = event.get("hook_event_name")
    if not config.capture_enabled:
        return None
    seen(conn, config.session_id, event, now=now)
    if name == "SessionStart":
        # deferred: the start brief's index modules only at SessionStart (kms hook runs once per event)
        from server.activity.brief import brief

        text = brief(conn, config, now=now)
        if not text:
            return None
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    session_material.record_event(conn, config.session_id, event, keep_prompts=config.capture_prompts, now=now)
    if name in CAPTURE_AT:
        # deferred: the YAML editors and pydantic only when a session note is captured (kms hook)
        from server.writes.capture import capture

        capture(config, str(name))
    if name == "Stop":
        return ask_to_capture(conn, config, event, now=now)
    return None


def seen(conn: apsw.Connection, session_id: str, event: Mapping[str, Any], *, now: float | None = None) -> None:
    """The session on record from its first hook, started then (a host running kms's hooks on its own,
    `kms hooks install` or a plugin, had no row: `kms session list` missed it and its note was dated 1970);
    a launcher's or a server's own row keeps its kind. ``SessionEnd`` ends it."""
    cwd = str(event.get("cwd") or "") or None
    touch_session(conn, session_id, kind="host", cwd=cwd, project=cwd, now=now)
    if event.get("hook_event_name") == "SessionEnd":
        end_session(conn, session_id, None, now=now)


def changed_notes(conn: apsw.Connection, session_id: str) -> tuple[int, int]:
    """(agent writes of this session that changed a note, its successful ``kms_capture`` calls)."""
    found = conn.execute(
        "SELECT sum(tool != ?), sum(tool = ?) FROM tool_invocations WHERE session_id = ? AND actor = 'agent' "
        "AND status = 'success' AND change_kind IS NOT NULL",
        (CAPTURE_TOOL, CAPTURE_TOOL, session_id),
    ).fetchall()
    changed, captured = found[0] if found else (0, 0)
    return int(changed or 0), int(captured or 0)


def ask_to_capture(
    conn: apsw.Connection, config: SessionConfig, event: Mapping[str, Any], *, now: float | None = None
) -> dict[str, Any] | None:
    """The Stop rule (``capture.ask_agent``): see the module docstring."""
    least = config.capture_ask
    if least <= 0 or event.get("stop_hook_active") or not config.tier_enabled("write"):
        return None
    record = session_material.get(conn, config.session_id)
    if record is not None and record.asked_at is not None:
        return None
    changed, captured = changed_notes(conn, config.session_id)
    if captured or changed < least:
        return None
    session_material.mark_asked(conn, config.session_id, time.time() if now is None else now)
    return {"decision": "block", "reason": ASK_REASON.format(n=changed)}
