"""Malformed protocol input over the real stdio server: every request answered, no crash, no hang."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def env(db_path: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "KMS_DB_PATH": str(db_path),
        "KMS_CONFIG": str(tmp_path / "config.toml"),
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
        "KMS_EMBED_ENABLED": "0",
        "PYTHONIOENCODING": "utf-8",
    }


def call(rid: object, arguments: str, name: str = "kms_search") -> str:
    return (
        '{"jsonrpc":"2.0","id":'
        + json.dumps(rid)
        + ',"method":"tools/call","params":{"name":"'
        + name
        + '","arguments":'
        + arguments
        + "}}"
    )


def hostile(seed: int) -> list[tuple[object, str]]:
    """(id the answer must carry, or None for an answer with id null, line). Listed shapes first,
    then random ones: ids are unique so each answer can be matched."""
    deep = lambda n, o="[", c="]": o * n + c * n  # noqa: E731
    cases: list[tuple[object, str]] = [
        (None, deep(1000)),
        (None, deep(1000, '{"a":', "}").replace('{"a":}', '{"a":1}')),
        (1, call(1, '{"query":"x","nested":' + deep(1000) + "}")),
        (2, call(2, '{"query":' + '{"a":' * 1000 + "1" + "}" * 1000 + "}")),
        (None, '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}'),
        (None, '{"jsonrpc":"2.0","id":[1,2],"method":"ping"}'),
        (None, '{"jsonrpc":"2.0","id":true,"method":"ping"}'),
        (None, '{"jsonrpc":"2.0","id":1.5,"method":"ping"}'),
        (3, call(3, '{"query":"\\ud800"}')),
        (4, call(4, '{"title":"\\udfff x","content":"y"}', "kms_create")),
        (5, call(5, '{"noteId":"\\ud83d","content":"y"}', "kms_append")),
        (6, call(6, '{"query":"x","vault":"\\uDC00"}')),
        (7, call(7, '{"query":"x","limit":' + "9" * 100 + "}")),
        (8, call(8, '{"query":"x","limit":-' + "1" * 30 + "}")),
        (9, '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":[]}'),
        (10, '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":"x"}'),
        (11, '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"kms_search","arguments":NaN}}'),
        (12, '{"jsonrpc":"1.0","id":12,"method":"ping"}'),
        (13, '{"jsonrpc":"2.0","id":13,"method":42}'),
        (14, '{"jsonrpc":"2.0","id":14,"method":"ping"'),  # cut short
        # raw bytes (written through surrogateescape): a lone 0xED, an encoded surrogate (ED A0 80)
        (15, call(15, '{"query":"a\udcedb"}')),
        (16, call(16, '{"noteId":"x","content":"\udced\udca0\udc80"}', "kms_append")),
        (10**30, '{"jsonrpc":"2.0","id":' + str(10**30) + ',"method":"ping"}'),  # answered with its id
        (None, "[]"),
        (None, '[{"jsonrpc":"2.0","id":15,"method":"ping"}]'),
        (None, "{}"),
        (None, "\xff\xfe not utf-8"),
        (None, '"just a string"'),
    ]
    cases += [(100 + n, call(100 + n, '{"query":' + deep(n) + "}")) for n in range(200, 901, 100)]
    # notifications: dropped (logged), never answered, never fatal
    cases += [
        (None, '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1]}}'),
        (None, '{"jsonrpc":"2.0","method":"notifications/cancelled","params":[]}'),
        (None, '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":' + deep(500) + "}}"),
    ]
    rng = random.Random(seed)
    pieces = ['"\\ud800"', "[", "]", "{", "}", '"a":', "1" * 40, "null", ",", '"x"', "NaN", "-", "1e999"]
    for n in range(60):
        body = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        cases.append((1000 + n, call(1000 + n, '{"query":' + body + "}")))
    return cases


NOTIFY_PREFIX = '{"jsonrpc":"2.0","method"'


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
def test_every_malformed_request_is_answered_and_the_server_goes_on(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, stdin_kind: str
) -> None:
    cases = hostile(seed=19)
    big = '{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"' + "a" * (65 * 1024 * 1024) + '"}}'
    out: list[str] = [json.dumps(INIT), json.dumps(INITIALIZED)]
    expected_ids: list[object] = []
    nulls = 0
    for n, (rid, line) in enumerate(cases):
        out.append(line)
        if rid is not None:
            expected_ids.append(rid)
        elif not line.startswith(NOTIFY_PREFIX):
            nulls += 1
        out.append(json.dumps({"jsonrpc": "2.0", "id": f"ping{n}", "method": "ping"}))  # still alive?
    out.append(big)
    out.append(call("after", '{"query":"shakshuka"}'))
    data = ("\n".join(out) + "\n").encode("utf-8", "surrogateescape").replace(b"\xc3\xbf\xc3\xbe", b"\xff\xfe")
    cmd = [sys.executable, "-m", "kmscli", "mcp"]
    started = time.monotonic()
    if stdin_kind == "pipe":
        done = subprocess.run(cmd, input=data, capture_output=True, env=env(db_path, tmp_path), timeout=120)
    else:
        (tmp_path / "in.jsonl").write_bytes(data)
        with open(tmp_path / "in.jsonl", "rb") as stdin:
            done = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env(db_path, tmp_path), timeout=120)
    assert time.monotonic() - started < 60  # no request left hanging until the end-of-input drain
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"Traceback" not in done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    for rid in expected_ids:
        assert rid in by_id, f"request {rid} never answered"
        random_one = isinstance(rid, int) and rid >= 1000  # may be valid JSON by chance
        assert random_one or "error" in by_id[rid] or by_id[rid]["result"]["isError"], by_id[rid]
    assert sum(1 for a in answers if a["id"] is None) == nulls
    assert all(f"ping{n}" in by_id for n in range(len(cases)))  # 0 crashes: it answered after each one
    assert by_id["big"]["error"]["message"] == "Invalid request: message longer than 16 MiB (the limit per line)"
    assert by_id["after"]["result"]["structuredContent"]["hits"][0]["title"] == "Shakshuka"
    deep_one = by_id[100 + 300]["error"]["message"]
    assert "deeper than 64 levels" in deep_one
    assert "surrogate" in by_id[3]["error"]["message"]
    assert "64 bits" in by_id[7]["error"]["message"]
    assert by_id[9]["error"] == {"code": -32602, "message": "Invalid params: params must be an object"}
    assert by_id[15]["error"]["code"] == by_id[16]["error"]["code"] == -32700
    assert "64 bits" in by_id[10**30]["error"]["message"]
