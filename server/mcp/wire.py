"""What a line of ``kms mcp``'s input must be before the SDK sees it.

The SDK drops a message it cannot validate (a debug log line, no answer) and a few shapes crash
it or the transport: JSON nested 1,000 deep (``RecursionError``), an ``id`` that is an object, a
``requestId`` that is a list, one huge line. ``screen`` checks every line against the limits
below and says what to answer instead: a JSON-RPC error for a request (with its id when it has a
usable one, ``null`` otherwise), a logged reason for a notification. The SDK then only ever sees
messages it accepts, so every request is answered and the server goes on.

A line must be valid UTF-8 (the SDK decodes it strictly: one raw byte such as ``0xED`` would end the
server), and an integer id of any size is echoed in its refusal, digit for digit: the client can
match the answer to its request even when the id breaks the 64-bit limit.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import mcp_types
from pydantic import ValidationError

log = logging.getLogger("kms.mcp")

MAX_LINE_BYTES = 16 * 1024 * 1024  # one message per line; the largest tool input is ~100 KB
MAX_DEPTH = 64  # arrays and objects inside one another, the envelope included
MAX_INT = 2**63 - 1  # integers are 64-bit, as in every client

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

_SURROGATE = re.compile("[\ud800-\udfff]")
_ID_IN_HEAD = re.compile(rb'"id"\s*:\s*(-?(?:0|[1-9]\d*)(?![\d.eE])|"(?:[^"\\]|\\.){0,200}")')
SNIFF_BYTES = 64 * 1024  # how far into an unparsable line its id is looked for


@dataclass(frozen=True)
class RawId:
    """An integer id written back exactly as the client sent it (Python will not turn an integer of
    more than 4,300 digits into text, and a client's own parser may not hold it in 64 bits either)."""

    digits: bytes


@dataclass(frozen=True)
class Refusal:
    """A line the SDK must not see: ``reply`` is the JSON-RPC error to send, or None for a
    notification or response, which is dropped (``reason`` is logged)."""

    reason: str
    reply: bytes | None


def _error(request_id: object, code: int, message: str) -> bytes:
    if isinstance(request_id, RawId):
        error = json.dumps({"code": code, "message": message}, separators=(",", ":")).encode()
        return b'{"jsonrpc":"2.0","id":' + request_id.digits + b',"error":' + error + b"}\n"
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def _answer_id(value: object) -> object:
    """The id a refusal carries: a usable id, or an integer of any size; None (``null``) otherwise."""
    if type(value) is int:
        return value  # it was parsed, so it has at most 4,300 digits and turns back into text
    return value if usable_id(value) and not _has_surrogate(value) else None


def usable_id(value: object) -> bool:
    """MCP request ids are strings or integers (not booleans, not floats, not objects)."""
    return (type(value) is int and -MAX_INT - 1 <= value <= MAX_INT) or type(value) is str


def sniff_id(head: bytes) -> object:
    """The id of a request that cannot be parsed, read from its first bytes when it stands at the
    top level of the envelope (nothing nested opened before it); None otherwise."""
    m = _ID_IN_HEAD.search(head[:SNIFF_BYTES])
    if m is None or head[: m.start()].count(b"{") != 1 or b"[" in head[: m.start()]:
        return None
    if not m.group(1).startswith(b'"'):
        digits = m.group(1)
        return int(digits) if len(digits) <= 18 else RawId(digits)
    try:
        value = json.loads(m.group(1))
    except ValueError:
        return None
    return value if usable_id(value) and not _has_surrogate(value) else None


def _has_surrogate(value: object) -> bool:
    return isinstance(value, str) and _SURROGATE.search(value) is not None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _problem(raw: object, escapes: bool) -> str | None:
    """The first limit the parsed message breaks, walking it without recursion."""
    stack: list[tuple[object, int]] = [(raw, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels (the limit)"
            for key, item in value.items():
                if escapes and _has_surrogate(key):
                    return "a string holds a lone UTF-16 surrogate (not valid Unicode)"
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels (the limit)"
            stack.extend((item, depth + 1) for item in value)
        elif type(value) is int:
            if not -MAX_INT - 1 <= value <= MAX_INT:
                return "an integer does not fit in 64 bits (the limit)"
        elif escapes and _has_surrogate(value):
            return "a string holds a lone UTF-16 surrogate (not valid Unicode)"
    return None


def oversized(head: bytes) -> Refusal:
    """A line longer than ``MAX_LINE_BYTES`` (already skipped by the reader)."""
    reason = f"message longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB (the limit per line)"
    return Refusal(reason, _error(sniff_id(head), INVALID_REQUEST, f"Invalid request: {reason}"))


def screen(line: bytes) -> tuple[object, Refusal | None]:
    """``(parsed message, None)`` when the SDK can take the line; ``(None, refusal)`` otherwise."""

    reason: str | None
    try:
        line.decode("utf-8")  # strictly: json.loads would let an encoded surrogate (ED A0 80) through
    except UnicodeDecodeError as e:
        reason = f"not valid UTF-8 (byte 0x{line[e.start]:02X} at offset {e.start})"
        return None, Refusal(reason, _error(sniff_id(line), PARSE_ERROR, f"Parse error: {reason}"))
    try:
        raw = json.loads(line, parse_constant=_reject_constant)
    except RecursionError:
        reason = f"nested deeper than {MAX_DEPTH} levels (the limit)"
        return None, Refusal(reason, _error(sniff_id(line), PARSE_ERROR, f"Parse error: {reason}"))
    except ValueError as e:  # also invalid UTF-8 and integers of more than 4,300 digits
        reason = f"not valid JSON ({e})"
        return None, Refusal(reason, _error(sniff_id(line), PARSE_ERROR, f"Parse error: {reason}"))
    if not isinstance(raw, dict):
        reason = "a message must be one JSON object (batches are not supported)"
        return None, Refusal(reason, _error(None, INVALID_REQUEST, f"Invalid request: {reason}"))
    request_id = raw.get("id")
    is_notification = "method" in raw and "id" not in raw
    answer_to = _answer_id(request_id)
    code = INVALID_REQUEST
    reason = _problem(raw, b"\\u" in line)
    if reason is None and "id" in raw and not (usable_id(request_id) and not _has_surrogate(request_id)):
        reason = "id must be a string or a 64-bit integer"
    if reason is None and "params" in raw and not isinstance(raw["params"], dict | None):
        code, reason = INVALID_PARAMS, "params must be an object"
    if reason is None:
        try:
            mcp_types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except ValidationError as e:  # what the SDK would drop unanswered
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            reason = f"not a valid JSON-RPC message ({where + ': ' if where else ''}{first['msg']})"
    if reason is None:
        return raw, None
    is_response = "method" not in raw and ("result" in raw or "error" in raw)
    if is_notification or is_response:
        return None, Refusal(reason, None)
    label = "Invalid params" if code == INVALID_PARAMS else "Invalid request"
    return None, Refusal(reason, _error(answer_to, code, f"{label}: {reason}"))
