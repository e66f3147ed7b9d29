"""Idempotency keys of write calls: a retry with the same key answers the first call's result, writes nothing.

An agent (or its host) that lost a write call's answer cannot tell whether the call ran; retrying a
``kms_append`` without a version would write twice. A write call may carry ``idempotencyKey``; its
successful call keeps the key and its answer on its provenance row (m023). A later call of the same
session with that key is answered from the row (``replayed`` true, the first call's ``invocationId``)
and writes nothing; the same key with another tool or other arguments is ``invalid-input``. A call that
failed keeps no answer, so its retry runs. Keys are per session: another session's key is its own.
The answer row is committed with the call's file changes' journal token, so a process that dies between
the file change and the row leaves nothing for a retry to write twice (``server.writes.once``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import apsw

from server.errors import KmsError

KEY_FIELD = "idempotencyKey"
MAX_KEY_CHARS = 128


def digest(tool: str, arguments: Mapping[str, Any]) -> str:
    """What makes two calls the same call: the tool and every argument but the key."""
    args = {k: v for k, v in arguments.items() if k != KEY_FIELD}
    return hashlib.sha256(json.dumps([tool, args], sort_keys=True, default=str).encode()).hexdigest()


def call_id(session_id: str, key: str) -> str:
    """A keyed call's name in its write's journal (``server.writes.once``): its session and key, hashed (the
    journal, a file beside the database, never holds an agent's key as sent)."""
    return hashlib.sha256(f"{session_id}\0{key}".encode()).hexdigest()


def answer_json(tool: str, arguments: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """The ``answer`` column of a keyed call's row."""
    return json.dumps({"digest": digest(tool, arguments), "result": result}, default=str)


def replay(
    conn: apsw.Connection, session_id: str, tool: str, key: str, arguments: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The first call's answer for ``key`` in this session, or None when there was none (or it failed)."""
    found = conn.execute(
        """SELECT id, tool, answer FROM tool_invocations
                            WHERE session_id = ? AND idempotency_key = ? AND answer IS NOT NULL
                            ORDER BY id LIMIT 1""",
        (session_id, key),
    ).fetchall()
    if not found:
        return None
    invocation_id, first_tool, answer = found[0]
    stored = json.loads(str(answer))
    if first_tool != tool or stored["digest"] != digest(tool, arguments):
        raise KmsError(
            "invalid-input",
            f"idempotencyKey {key!r} was used for another call in this session "
            f"(#{invocation_id}, {first_tool}); use a new key for a new call",
            invocationId=invocation_id,
        )
    return {**stored["result"], "invocationId": invocation_id, "replayed": True}
