"""The service's HTTP limits before any work (``server.mcp.http_guard``), against a real ``kms serve`` subprocess
spoken to over real sockets: exact Host and Origin on every route, the token before the body, the body
counted as it streams, slow heads and bodies timed out, and every refusal a typed JSON error.

The service runs with ``KMS_SERVICE_READ_TIMEOUT=1`` so the slow-request tests take seconds, not minutes.
"""

from __future__ import annotations

import json
import select
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import httpx2
import psutil
import pytest
from support.service import Served

from server.activity import tokens
from server.config.scopes import Scopes
from server.config.session_contract import SessionConfig
from server.mcp.http_guard import BODY_DEADLINE_FACTOR, MAX_BODY_BYTES, MAX_HEAD_BYTES

READ_TIMEOUT_S = 1.0
MB = 1024 * 1024


@dataclass(frozen=True)
class Service:
    port: int
    pid: int
    host_token: str  # a host's token (tier:read): /mcp
    session_token: str  # a kms claude session's token: /hooks

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def served(indexed: apsw.Connection, db_path: Path) -> Iterator[Service]:
    """``kms serve`` in its own process on a free port, with a 1 s read timeout; stopped after the test with
    Ctrl-C (SIGINT), as its help says, and it must exit 0 with nothing escaped from a route."""
    _h, host_token = tokens.create(indexed, label="test host", scopes=Scopes.parse("tier:read"))
    config = SessionConfig.from_env({"KMS_DB_PATH": str(db_path)}, watch=False)
    _s, session_token = tokens.for_session(indexed, config)
    running = Served.start(db_path, timeout=60, KMS_SERVICE_READ_TIMEOUT=str(READ_TIMEOUT_S))
    try:
        yield Service(running.port, running.proc.pid, host_token, session_token)
    finally:
        running.stop(signal.SIGINT)


def headers(svc: Service, token: str | None, **extra: str) -> dict[str, str]:
    out = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        out["Authorization"] = f"Bearer {token}"
    return {**out, **extra}


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


def requests(svc: Service, **extra: str) -> list[httpx2.Response]:
    """One request to each route with these headers: /mcp, /hooks/stop (each with its token), /health."""
    return [
        httpx2.post(f"{svc.base}/mcp", json=INITIALIZE, headers=headers(svc, svc.host_token, **extra), timeout=10),
        httpx2.post(
            f"{svc.base}/hooks/stop",
            json={"session_id": "x"},
            headers=headers(svc, svc.session_token, **extra),
            timeout=10,
        ),
        httpx2.get(f"{svc.base}/health", headers=extra, timeout=10),
    ]


def test_host_and_origin_are_matched_exactly_on_every_route(served: Service) -> None:
    """A Host or Origin that merely starts like the service's (the SDK's prefix match let these through) is
    refused on every route, 421 and 403 with a typed JSON error; the service's own names are served."""
    port = served.port
    bad_hosts = [
        f"127.0.0.1:{port}.evil.example",
        f"localhost:{port}@evil.example",
        f"127.0.0.1:{port + 1}",
        "127.0.0.1",
        "evil.example",
    ]
    for host in bad_hosts:
        for answer in requests(served, Host=host):
            assert answer.status_code == 421, (host, answer.request.url, answer.status_code, answer.text)
            assert answer.json()["error"] == "misdirected", answer.text
    bad_origins = [
        f"http://127.0.0.1:{port}@evil.example",
        f"http://127.0.0.1:{port}.evil.example",
        f"https://127.0.0.1:{port}",
        f"http://localhost:{port + 1}",
        "null",
    ]
    for origin in bad_origins:
        for answer in requests(served, Origin=origin):
            assert answer.status_code == 403, (origin, answer.request.url, answer.status_code, answer.text)
            assert answer.json()["error"] == "forbidden-origin", answer.text
    for good in ({}, {"Host": f"localhost:{port}"}, {"Host": f"[::1]:{port}"}, {"Origin": f"http://localhost:{port}"}):
        assert [a.status_code for a in requests(served, **good)] == [200, 200, 200], good


def raw_answer(sock: socket.socket, within_s: float) -> tuple[int, dict[str, object], bool]:
    """(status, JSON body, closed) of the answer on ``sock``: read until the server closes or ``within_s``."""
    sock.settimeout(within_s)
    data = b""
    closed = False
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
    assert data, "no answer"
    head, _sep, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body), closed


def connect(svc: Service) -> socket.socket:
    return socket.create_connection(("127.0.0.1", svc.port), timeout=5)


def post_head(svc: Service, path: str, length: int, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{svc.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{auth}Content-Length: {length}\r\n\r\n"
    ).encode()


def upload_without_token(svc: Service, path: str, size: int) -> tuple[int, dict[str, object], bool, int]:
    """POST ``size`` bytes with no token, sending until the service answers: (status, body, closed, bytes sent)."""
    chunk, sent = b"x" * MB, 0
    with connect(svc) as sock:
        sock.sendall(post_head(svc, path, size, None))
        try:
            while sent < size and not select.select([sock], [], [], 0)[0]:
                sent += sock.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, body, closed = raw_answer(sock, 5)
    return status, body, closed, sent


def test_a_200_mb_upload_without_a_token_is_refused_before_its_body_is_read(served: Service) -> None:
    """401 as soon as the head is in: the body is never read, and the service's memory does not grow with it
    (it grew by 400 MB when the body was read before the token was checked)."""
    service = psutil.Process(served.pid)
    httpx2.get(f"{served.base}/health", timeout=10)
    for path in ("/hooks/session-end", "/mcp"):
        before = service.memory_info().rss
        status, body, closed, sent = upload_without_token(served, path, 200 * MB)
        grown = (service.memory_info().rss - before) / MB
        assert status == 401 and body["error"] == "unauthorized", (path, status, body)
        assert closed, "the connection stays open for the rest of the body"
        assert sent < 50 * MB, f"{path}: {sent / MB:.0f} MB went in before the refusal"
        assert grown < 5, f"{path}: the service grew by {grown:.1f} MB"


def test_a_body_over_the_limit_is_refused_before_or_as_it_streams(served: Service) -> None:
    """A Content-Length over the limit is refused with no byte of the body sent; a chunked body (no length) is
    counted as it comes: 413 once it passes the limit, not at its end."""
    for path, token in (("/hooks/stop", served.session_token), ("/mcp", served.host_token)):
        with connect(served) as sock:
            sock.sendall(post_head(served, path, MAX_BODY_BYTES + 1, token))  # and no byte of the body
            status, body, closed = raw_answer(sock, 3)
        assert status == 413 and body["error"] == "too-large" and closed, (path, status, body)
    head = post_head(served, "/hooks/stop", 0, served.session_token).replace(
        b"Content-Length: 0", b"Transfer-Encoding: chunked"
    )
    sent = 0
    with connect(served) as sock:
        sock.sendall(head)
        piece = b"%x\r\n%s\r\n" % (MB, b" " * MB)
        try:
            while sent < 4 * MAX_BODY_BYTES and not select.select([sock], [], [], 0)[0]:
                sock.sendall(piece)
                sent += MB
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, body, _closed = raw_answer(sock, 5)
    assert status == 413 and body["error"] == "too-large", (status, body)
    assert sent <= MAX_BODY_BYTES + 8 * MB, f"{sent / MB:.0f} MB went in before the refusal"


def trickle(sock: socket.socket, pieces: Iterator[bytes], every_s: float, within_s: float) -> float | None:
    """Send one piece every ``every_s`` until the server answers or closes; when it did (seconds), None if not."""
    start = time.monotonic()
    while time.monotonic() - start < within_s:
        if select.select([sock], [], [], every_s)[0]:
            return time.monotonic() - start
        try:
            sock.sendall(next(pieces))
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - start
    return None


def forever(piece: bytes) -> Iterator[bytes]:
    while True:
        yield piece


def test_a_trickled_head_an_idle_connection_and_a_huge_head_are_closed(served: Service) -> None:
    """Slowloris: a request line sent, then a header byte now and then, never finished: 408 and closed within
    the read timeout. A connection that sends nothing is closed too; a head over the limit is 431."""
    with connect(served) as sock:
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nX-Slow: ".encode())
        after = trickle(sock, forever(b"a"), 0.2, 10 * READ_TIMEOUT_S)
        assert after is not None, "the service kept waiting for the head"
        status, body, closed = raw_answer(sock, 3)
    assert after < READ_TIMEOUT_S + 2, after
    assert status == 408 and body["error"] == "timeout" and closed, (status, body)
    with connect(served) as sock:
        assert trickle(sock, forever(b""), 0.2, 10 * READ_TIMEOUT_S) is not None, "an idle connection stays"
    with connect(served) as sock:
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nX-Big: ".encode())
        sock.sendall(b"a" * (MAX_HEAD_BYTES + 1024))
        status, body, closed = raw_answer(sock, 3)
    assert status == 431 and body["error"] == "too-large" and closed, (status, body)


def test_a_stalled_body_and_a_trickled_body_are_closed(served: Service) -> None:
    """A body that stops coming: 408 after the read timeout. A body that comes a byte at a time, each in time,
    never ending: 408 at the whole body's deadline."""
    with connect(served) as sock:
        sock.sendall(post_head(served, "/mcp", 1000, served.host_token) + b'{"jsonrpc":')
        after = trickle(sock, forever(b""), 0.2, 10 * READ_TIMEOUT_S)
        status, body, closed = raw_answer(sock, 3)
    assert after is not None and after < READ_TIMEOUT_S + 2, after
    assert status == 408 and body["error"] == "timeout" and closed, (status, body)
    with connect(served) as sock:
        sock.sendall(post_head(served, "/hooks/stop", 10_000, served.session_token))
        whole = BODY_DEADLINE_FACTOR * READ_TIMEOUT_S
        after = trickle(sock, forever(b" "), READ_TIMEOUT_S / 3, whole + 5)
        status, body, closed = raw_answer(sock, 3)
    assert after is not None and whole - 1 < after < whole + 3, after
    assert status == 408 and body["error"] == "timeout" and closed, (status, body)


def test_malformed_requests_get_typed_json_errors_never_a_traceback(served: Service) -> None:
    """Wrong method, unknown route or event, bad JSON, an unparsable request: a JSON error each, and the
    service goes on serving."""
    hook = headers(served, served.session_token)
    answers = [
        (405, httpx2.get(f"{served.base}/hooks/stop", headers=hook, timeout=10)),
        (405, httpx2.post(f"{served.base}/health", headers={}, timeout=10)),
        (404, httpx2.get(f"{served.base}/nowhere", timeout=10)),
        (404, httpx2.post(f"{served.base}/hooks/no-such-event", json={}, headers=hook, timeout=10)),
        (400, httpx2.post(f"{served.base}/mcp", content=b"{not json", headers=headers(served, served.host_token))),
        (401, httpx2.post(f"{served.base}/hooks/stop", content=b"{not json", headers=headers(served, "kms_nope"))),
    ]
    for expected, answer in answers:
        assert answer.status_code == expected, (answer.request.method, answer.request.url, answer.text)
        assert "Traceback" not in answer.text and "error" in answer.json(), answer.text
    bad_json = httpx2.post(f"{served.base}/hooks/stop", content=b"{not json", headers=hook, timeout=10)
    assert bad_json.status_code == 200 and "Traceback" not in bad_json.text  # a hook never stops its host
    with connect(served) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        status, body, closed = raw_answer(sock, 3)
    assert status == 400 and body["error"] == "invalid-request" and closed, (status, body)
    assert httpx2.get(f"{served.base}/health", timeout=10).json()["kms"] is True


def test_a_refused_token_is_told_why(served: Service, indexed: apsw.Connection) -> None:
    """A revoked token's agent saw only "Server returned an error response": the 401's body now says the token
    was revoked (or lapsed, or is unknown), and tells the state only to a client holding the token's secret."""

    def refused_with(token: str) -> str:
        answer = httpx2.post(f"{served.base}/mcp", json=INITIALIZE, headers=headers(served, token), timeout=10)
        assert answer.status_code == 401 and answer.json()["error"] == "unauthorized", answer.text
        return str(answer.json()["message"])

    made, secret = tokens.create(indexed, label="bot for drafts", scopes=Scopes.parse("tier:read"))
    tokens.revoke(indexed, made.id)
    assert "(bot for drafts) was revoked" in refused_with(secret)
    assert refused_with(secret[:-4] + "abcd").startswith("unknown kms token")  # the id, not its secret: nothing
    assert refused_with("kms_nonsense").startswith("unknown kms token")
