"""Issue 37: a token's open event stream ends as soon as the token stops being active. A real HTTP client holds
the Streamable HTTP GET stream of a real service open; revoking the token (``kms token revoke``), or letting a
session token's lease lapse, ends that stream within about two seconds, cleanly (its last chunk)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import apsw
import httpx2
import pytest
from test_service_http import running, two_vaults  # noqa: F401 - fixtures

from server.activity import tokens
from server.config.scopes import Scopes
from server.mcp import service

PROTOCOL = "2025-11-25"
LEASE_S = 3.0


class HeldStream:
    """The GET event stream of one MCP session, read in a thread until the service ends it."""

    def __init__(self, http: httpx2.Client, url: str, headers: dict[str, str]) -> None:
        self.opened = threading.Event()
        self.ended_at: float | None = None
        self.status: int | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, args=(http, url, headers), daemon=True)
        self._thread.start()

    def _read(self, http: httpx2.Client, url: str, headers: dict[str, str]) -> None:
        try:
            with http.stream("GET", url, headers={**headers, "Accept": "text/event-stream"}) as reply:
                self.status = reply.status_code
                self.opened.set()
                for _chunk in reply.iter_bytes():
                    pass
        except BaseException as e:  # noqa: BLE001 - kept for the test to show
            self.error = e
        finally:
            self.ended_at = time.monotonic()
            self.opened.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


@pytest.fixture
def http() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=httpx2.Timeout(10, read=60)) as client:
        yield client


def open_stream(http: httpx2.Client, state: service.ServiceState, secret: str) -> HeldStream:
    """An MCP session (initialize, initialized) and its GET stream, open."""
    auth = {"Authorization": f"Bearer {secret}", "Accept": "application/json, text/event-stream"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    reply = http.post(state.url, json=hello, headers=auth)
    assert reply.status_code == 200, reply.text
    session = {"mcp-session-id": reply.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    done = http.post(state.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=auth | session)
    assert done.status_code == 202, done.text
    stream = HeldStream(http, state.url, {"Authorization": auth["Authorization"], **session})
    assert stream.opened.wait(10) and stream.status == 200, (stream.status, stream.error)
    return stream


def test_revoking_a_token_ends_its_open_stream(
    running: service.ServiceState,  # noqa: F811 - a fixture
    two_vaults: apsw.Connection,  # noqa: F811 - a fixture
    http: httpx2.Client,
) -> None:
    token, secret = tokens.create(two_vaults, label="stream", scopes=Scopes.parse("tier:read"))
    stream = open_stream(http, running, secret)
    time.sleep(1.5)  # the wait is the test: a stream that outlives several checks of its token stays open
    assert stream.ended_at is None, stream.error
    tokens.revoke(two_vaults, token.id)
    revoked = time.monotonic()
    stream.join(5)
    assert stream.ended_at is not None, "the revoked token's stream is still open"
    assert stream.ended_at - revoked <= 2.0
    assert stream.error is None, f"the stream was cut, not ended: {stream.error!r}"


def test_a_lapsed_lease_ends_its_open_stream(
    running: service.ServiceState,  # noqa: F811 - a fixture
    two_vaults: apsw.Connection,  # noqa: F811 - a fixture
    http: httpx2.Client,
) -> None:
    token, secret = tokens.create(
        two_vaults, label="kms claude lapsing", scopes=Scopes.parse("tier:read"), kind="session", expires_in_s=LEASE_S
    )
    stream = open_stream(http, running, secret)
    assert token.expires_at is not None
    stream.join(LEASE_S + 5)
    assert stream.ended_at is not None, "the lapsed lease's stream is still open"
    lapsed_for = stream.ended_at - (time.monotonic() - (time.time() - token.expires_at))
    assert lapsed_for <= 2.0, f"ended {lapsed_for:.1f} s after the lease lapsed"
    assert stream.error is None, f"the stream was cut, not ended: {stream.error!r}"
