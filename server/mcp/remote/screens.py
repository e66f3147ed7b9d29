"""The remote listener's screens around the SDK's handlers, one ASGI wrapper each (``remote_app`` puts them on):

- ``TargetCheck`` (``/token``): a ``resource`` other than this listener's ``/mcp`` is ``invalid_target``;
- ``SecretCheck`` (``/token``, ``/revoke``): a confidential client's secret against its stored hash;
- ``RegistrationLimit`` (``/register``): 429 past the hourly limit;
- ``IssOnRedirects`` (``/authorize``): ``iss`` on an error sent back to the client (RFC 9207);
- ``ScopeCheck`` (``/mcp``): 403 ``insufficient_scope`` for a tool above the grant's tier;
- ``ForwardingSeen`` (everything): which forwarding headers the TLS terminator adds, for the doctor.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import logging
import os
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit, urlunsplit

from server.activity import remote_grants
from server.config.scopes import ScopeError, Scopes
from server.config.tiers import TIERS
from server.mcp.http_guard import replay
from server.mcp.remote.provider import SECRET_HASH, same_resource
from server.store.db import service_folder, thread_connection

log = logging.getLogger("kms.service")


def _form_of(body: bytes) -> dict[str, list[str]]:
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


async def _answer(send: Any, status: int, body: dict[str, Any], *headers: tuple[bytes, bytes]) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def _body(receive: Any) -> tuple[bytes, Any]:
    """The whole body (``HttpGuard`` has read it within its limit) and a receive that replays it."""
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False) and message.get("type") == "http.request"
    return body, replay([{"type": "http.request", "body": body, "more_body": False}], receive)


class TargetCheck:
    """The token endpoint: a ``resource`` other than this listener's ``/mcp`` is ``invalid_target`` (RFC 8707
    §2), for a code and a refresh alike (the SDK passes it on to no provider hook)."""

    def __init__(self, app: Any, resource: str) -> None:
        self.app, self.resource = app, resource

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await _body(receive)
        named = _form_of(body).get("resource", [])
        if any(not same_resource(r, self.resource) for r in named):
            await _answer(
                send,
                400,
                {"error": "invalid_target", "error_description": f"tokens here are only for {self.resource}"},
            )
            return
        await self.app(scope, replay, send)


class SecretCheck:
    """``/token`` and ``/revoke``: a client registered with a secret must present it (``client_secret`` in the
    form, or HTTP Basic), checked against its stored hash; else 401 ``invalid_client``. (The SDK then sees the
    client as a public one: the stored record holds no secret to compare.)"""

    def __init__(self, app: Any, db_path: Any) -> None:
        self.app, self.db_path = app, db_path

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await _body(receive)
        form = _form_of(body)
        client_id, presented = (form.get("client_id") or [""])[0], (form.get("client_secret") or [""])[0]
        basic = dict(scope.get("headers", [])).get(b"authorization", b"").decode("latin-1")
        if basic.lower().startswith("basic "):
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                user, _sep, password = base64.b64decode(basic[6:]).decode().partition(":")
                client_id, presented = client_id or unquote(user), unquote(password)
        info = remote_grants.load_client(thread_connection(self.db_path), client_id) if client_id else None
        stored = (info or {}).get(SECRET_HASH)
        if stored and not hmac.compare_digest(stored, remote_grants.digest(presented)):
            await _answer(send, 401, {"error": "invalid_client", "error_description": "wrong or missing client secret"})
            return
        await self.app(scope, replay, send)


class RegistrationLimit:
    """``/register``: 429 once ``remote_grants.REGISTRATIONS_PER_HOUR`` clients registered in the last hour."""

    def __init__(self, app: Any, db_path: Any) -> None:
        self.app, self.db_path = app, db_path

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("method") == "POST" and not remote_grants.registration_open(thread_connection(self.db_path)):
            await _answer(
                send,
                429,
                {"error": "rate_limited", "error_description": "too many registrations in the last hour"},
                (b"retry-after", b"3600"),
            )
            return
        await self.app(scope, receive, send)


class IssOnRedirects:
    """``/authorize``: an error sent back to the client's redirect carries ``iss`` too (RFC 9207 §2); the
    success path goes through the consent page, which adds it itself."""

    def __init__(self, app: Any, issuer: str) -> None:
        self.app, self.issuer = app, issuer

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        async def with_iss(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] in (302, 303):
                headers = []
                for name, value in message.get("headers", []):
                    if name.lower() == b"location":
                        value = self._add_iss(value.decode("latin-1")).encode("latin-1")
                    headers.append((name, value))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_iss)

    def _add_iss(self, location: str) -> str:
        parts = urlsplit(location)
        query = parse_qs(parts.query, keep_blank_values=True)
        if location.startswith(self.issuer + "/consent") or "iss" in query or "error" not in query:
            return location
        query_with_iss = (parts.query + "&" if parts.query else "") + urlencode({"iss": self.issuer})
        return urlunsplit((parts.scheme, parts.netloc, parts.path, query_with_iss, parts.fragment))


class ScopeCheck:
    """The public ``/mcp``: a ``tools/call`` of a tool above the grant's tier is refused before it runs with 403
    ``insufficient_scope`` naming the scope it needs (the MCP authorization spec's step-up signal), rather than
    a tool error: the client may ask the person for a wider grant. (``tools/list`` already leaves such tools
    out; a tool the person's own settings turned off stays a tool error, ``feature-disabled``.)"""

    def __init__(self, app: Any, metadata_url: str) -> None:
        # deferred: the tool registry only in the service; kms remote doctor imports this module
        from server.mcp.tools import REGISTRY

        self.app, self.metadata_url = app, metadata_url
        self.tiers = {spec.name: spec.tier for spec in REGISTRY}

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        granted = getattr(getattr(scope.get("user"), "access_token", None), "scopes", None)
        if scope.get("method") != "POST" or granted is None:
            await self.app(scope, receive, send)
            return
        body, replay = await _body(receive)
        needed = self._needed(body, " ".join(granted))
        if needed is not None:
            challenge = (
                f'Bearer error="insufficient_scope", scope="tier:{needed}", resource_metadata="{self.metadata_url}"'
            )
            await _answer(
                send,
                403,
                {"error": "insufficient_scope", "error_description": f"this tool needs tier:{needed}"},
                (b"www-authenticate", challenge.encode()),
            )
            return
        await self.app(scope, replay, send)

    def _needed(self, body: bytes, granted: str) -> str | None:
        if b"tools/call" not in body:  # most messages: no second parse
            return None
        try:
            message = json.loads(body)
        except ValueError:
            return None  # the SDK answers a malformed body
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return None
        name = (message.get("params") or {}).get("name") if isinstance(message.get("params"), dict) else None
        tier = self.tiers.get(name) if isinstance(name, str) else None
        try:
            ceiling = Scopes.parse(granted).tier
        except ScopeError:
            return None
        return tier if tier is not None and TIERS.index(tier) > TIERS.index(ceiling) else None


FORWARDING = (b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"forwarded", b"cf-connecting-ip")
SEEN_EVERY_S = 10.0


def seen_path(db_path: Any) -> Path:
    """Where the remote listener notes the forwarding headers it last saw (``kms remote doctor`` reads it)."""
    return service_folder(Path(db_path)) / "remote-seen.json"


class ForwardingSeen:
    """Notes which forwarding headers the TLS terminator adds (and ``X-Forwarded-Proto``), at most every
    ``SEEN_EVERY_S``, for ``kms remote doctor``: whether requests come through a terminator at all, and over
    https. Nothing is trusted from them (uvicorn runs without proxy headers)."""

    def __init__(self, app: Any, db_path: Any) -> None:
        self.app, self.path = app, seen_path(db_path)
        self.last: tuple[float, tuple[str, ...], str] = (0.0, (), "")

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = dict(scope.get("headers", []))
            names = tuple(n.decode() for n in FORWARDING if n in headers)
            proto = headers.get(b"x-forwarded-proto", b"").decode("latin-1")[:10]
            now = time.time()
            if names and (now - self.last[0] >= SEEN_EVERY_S or (names, proto) != self.last[1:]):
                self.last = (now, names, proto)
                try:
                    tmp = self.path.with_suffix(".tmp")
                    tmp.write_text(json.dumps({"at": now, "headers": list(names), "proto": proto}))
                    os.replace(tmp, self.path)
                except OSError:
                    log.debug("could not note the forwarding headers", exc_info=True)
        await self.app(scope, receive, send)
