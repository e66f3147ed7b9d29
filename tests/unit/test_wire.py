"""The input screen of ``kms mcp`` (server/mcp/wire.py): what passes, what is refused and how."""

from __future__ import annotations

import json

from server.mcp import wire


def req(rid: object, params: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_depth_limit_is_exact() -> None:
    # envelope (1) + params (2) + arguments (3) + the value's lists
    ok = req(1, {"name": "kms_search", "arguments": {"query": nested(wire.MAX_DEPTH - 3)}})
    too_deep = req(2, {"name": "kms_search", "arguments": {"query": nested(wire.MAX_DEPTH - 2)}})
    assert wire.screen(ok)[1] is None
    msg, refusal = wire.screen(too_deep)
    assert msg is None and refusal is not None and refusal.reply is not None
    reply = json.loads(refusal.reply)
    assert reply["id"] == 2 and reply["error"]["code"] == wire.INVALID_REQUEST
    assert f"deeper than {wire.MAX_DEPTH} levels" in reply["error"]["message"]


def test_a_plain_call_passes_parsed() -> None:
    msg, refusal = wire.screen(req("a", {"name": "kms_search", "arguments": {"query": "x", "limit": 5}}))
    assert refusal is None and isinstance(msg, dict) and msg["id"] == "a"


def test_ids_are_read_from_a_message_that_cannot_be_parsed() -> None:
    assert wire.sniff_id(b'{"jsonrpc":"2.0","id":7,"method":"x","params":[[[') == 7
    assert wire.sniff_id(b'{"jsonrpc":"2.0","id":"q\\"1","method":"x"') == 'q"1'
    assert wire.sniff_id(b'{"params":{"id":5},"id":6') is None  # nested first: not the envelope's
    assert wire.sniff_id(b'{"id":1.5}') is None and wire.sniff_id(b"[[[[") is None


def test_notifications_and_responses_are_dropped_never_answered() -> None:
    bad_note = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":[]}'
    bad_response = b'{"jsonrpc":"2.0","id":{"a":1},"result":{}}'
    for line in (bad_note, bad_response):
        msg, refusal = wire.screen(line)
        assert msg is None and refusal is not None and refusal.reply is None and refusal.reason


def test_oversized_names_the_limit_and_the_id() -> None:
    refusal = wire.oversized(b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"aaaa')
    assert refusal.reply is not None
    reply = json.loads(refusal.reply)
    assert reply["id"] == "big" and "16 MiB" in reply["error"]["message"]
