"""Raw bytes through the real stdio reader (``stdio._Lines`` over ``wire.screen``): whatever a line
holds, the reader never raises, the SDK only gets valid UTF-8 JSON-RPC, and a request whose id can be
read is answered with that id."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from server.mcp import stdio

TEMPLATE = b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"kms_search","arguments":{"query":"%s"}}}'


def through_reader(lines: list[bytes]) -> tuple[list[str], list[bytes]]:
    """What the SDK is handed and what the reader answered itself, for these input lines."""
    passed: list[str] = []
    replies: list[bytes] = []

    async def run() -> None:
        queue = iter(lines)

        async def readline() -> bytes:
            return next(queue)  # StopIteration past the last line: no end of input, no drain to wait for

        async def reply(data: bytes) -> None:
            replies.append(data)

        with contextlib.suppress(RuntimeError):  # StopIteration surfaces as RuntimeError in a coroutine
            async for text in stdio._Lines(readline, stdio._Unanswered(), reply):
                passed.append(text)

    asyncio.run(run())
    return passed, replies


def _loads(data: bytes | str) -> dict:
    return json.loads(data, parse_int=lambda s: int(s) if len(s) < 1000 else s)


request_ids = hs.one_of(
    hs.integers(min_value=-(10**40), max_value=10**40),
    hs.text(max_size=20),
    hs.integers(min_value=1001, max_value=5000).map(lambda n: "9" * n),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rid=request_ids, junk=hs.binary(max_size=40))
def test_raw_bytes_inside_a_request_still_get_it_answered_with_its_id(rid: object, junk: bytes) -> None:
    digits = isinstance(rid, str) and rid.startswith("999")
    id_text = cast(str, rid).encode() if digits else json.dumps(rid).encode()
    junk = junk.replace(b"\n", b" ").replace(b'"', b"'").replace(b"\\", b"/")
    line = TEMPLATE % (id_text, junk)
    passed, replies = through_reader([line])
    assert len(passed) + len(replies) == 1  # exactly one fate: the SDK answers it, or the reader did
    if passed:
        msg = _loads(passed[0])
        assert msg["id"] == rid and not digits
        return
    answer = _loads(replies[0])
    assert "error" in answer
    assert answer["id"] == rid or str(answer["id"]) == str(rid)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=hs.lists(hs.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")), max_size=8))
def test_any_bytes_never_raise_and_every_reply_is_valid_json(lines: list[bytes]) -> None:
    passed, replies = through_reader(lines)
    for text in passed:
        assert isinstance(_loads(text.encode("utf-8")), dict)
    for data in replies:
        assert "error" in _loads(data)
    assert len(passed) + len(replies) <= sum(1 for line in lines if line.strip())


def test_an_encoded_surrogate_and_a_lone_byte_are_parse_errors_with_the_request_id() -> None:
    passed, replies = through_reader([TEMPLATE % (b"7", b"a\xed\xa0\x80b"), TEMPLATE % (b'"s"', b"a\xedb")])
    assert passed == []
    assert [(_loads(r)["id"], _loads(r)["error"]["code"]) for r in replies] == [(7, -32700), ("s", -32700)]
    assert "not valid UTF-8 (byte 0xED" in _loads(replies[0])["error"]["message"]


def test_an_id_too_large_for_64_bits_is_answered_with_it() -> None:
    big = b"1" + b"0" * 30
    passed, replies = through_reader([b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % big])
    assert passed == [] and replies[0].startswith(b'{"jsonrpc":"2.0","id":' + big + b',"error"')
    assert "64 bits" in _loads(replies[0])["error"]["message"]
