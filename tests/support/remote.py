"""Remote mode in tests: the service with its remote listener on loopback (plain HTTP, as the SDK allows for a
127.0.0.1 issuer), and the person's part of an OAuth authorization (the consent page, the pairing code)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import apsw
import httpx

from server.activity import remote_pairing
from server.mcp import service
from support.net import free_port

CLAUDE = "https://claude.ai/api/mcp/auth_callback"
# what an authorization request consented to carries, for tests that make a grant straight in the store
GRANT_PARAMS = {
    "scopes": "tier:write",
    "client_name": "claude.ai",
    "redirect_uri": CLAUDE,
    "explicit": True,
    "code_challenge": "x",
    "resource": "https://box.example.net/mcp",
}


@dataclass(frozen=True)
class Remote:
    state: service.ServiceState
    base: str  # the remote listener's origin (the issuer), http://127.0.0.1:PORT

    @property
    def resource(self) -> str:
        return f"{self.base}/mcp"


def remote_config(tmp_path: Path, port: int, extra: str = "", url: str | None = None) -> None:
    """Settings with remote mode on at ``url`` (default: the listener's own loopback address, plain HTTP)."""
    (tmp_path / "config.toml").write_text(
        "[agent]\nwrite = true\nedit = true\norganize = true\n"
        f'[remote]\nenabled = true\nurl = "{url or f"http://127.0.0.1:{port}"}"\nport = {port}\n{extra}'
    )


def wait_until(cond: Any, timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or cond}")


def _answers(base: str, host: str) -> bool:
    try:
        reply = httpx.get(f"{base}/.well-known/oauth-authorization-server", headers={"host": host}, timeout=1)
        return reply.status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def remote_service(db_path: Path, tmp_path: Path, extra: str = "", url: str | None = None) -> Iterator[Remote]:
    """The service in a thread of this process (local port free, remote port free), stopped after."""
    port = free_port()
    remote_config(tmp_path, port, extra, url)
    ready: list[service.ServiceState] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=service.run,
        args=(db_path,),
        kwargs={"port": 0, "host": "127.0.0.1", "on_ready": ready.append, "stop": stop},
        daemon=True,
    )
    thread.start()
    try:
        wait_until(lambda: ready, 20, "the service")
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(base, urlsplit(url or base).netloc), 20, "the remote listener")
        yield Remote(ready[0], base)
    finally:
        stop.set()
        thread.join(20)
        assert not thread.is_alive()


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def register(http: httpx.Client, base: str, redirect: str = CLAUDE, **extra: Any) -> httpx.Response:
    body = {"redirect_uris": [redirect], "client_name": "Test client", "token_endpoint_auth_method": "none", **extra}
    return http.post(f"{base}/register", json=body)


def query(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def consent_form(page: str) -> dict[str, str]:
    """The hidden fields of the consent page (its request key and CSRF token)."""
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))


def start_authorization(
    http: httpx.Client, base: str, client_id: str, challenge: str, *, redirect: str = CLAUDE, **params: str
) -> httpx.Response:
    q = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st4te",
        "resource": f"{base}/mcp",
        **params,
    }
    return http.get(f"{base}/authorize", params=q)


def consent(
    http: httpx.Client,
    conn: apsw.Connection,
    base: str,
    consent_url: str,
    *,
    code: str | None = None,
    decision: str = "allow",
    **fields: str,
) -> httpx.Response:
    """The person: opens the consent page, types a fresh pairing code (or ``code``), chooses, submits."""
    page = http.get(consent_url)
    assert page.status_code == 200, page.text
    form = consent_form(page.text)
    typed = code if code is not None else remote_pairing.new_code(conn)[0]
    data = {**form, "code": typed, "decision": decision, "tier": "write", **fields}
    return http.post(f"{base}/consent", data=data)


def authorize(
    http: httpx.Client, conn: apsw.Connection, base: str, *, redirect: str = CLAUDE, **fields: str
) -> tuple[str, str, str]:
    """A registered client taken through authorization and consent: (client_id, verifier, code)."""
    client_id = register(http, base, redirect).json()["client_id"]
    verifier, challenge = pkce()
    started = start_authorization(http, base, client_id, challenge, redirect=redirect)
    assert started.status_code == 302, started.text
    done = consent(http, conn, base, started.headers["location"], **fields)
    assert done.status_code == 303, done.text
    return client_id, verifier, query(done.headers["location"])["code"]


def exchange(
    http: httpx.Client, base: str, client_id: str, verifier: str, code: str, *, redirect: str = CLAUDE, **extra: str
) -> httpx.Response:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": client_id,
        "code_verifier": verifier,
        "redirect_uri": redirect,
        "resource": f"{base}/mcp",
        **extra,
    }
    return http.post(f"{base}/token", data=data)


def refresh(http: httpx.Client, base: str, client_id: str, token: str, **extra: str) -> httpx.Response:
    data = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id, **extra}
    return http.post(f"{base}/token", data=data)
