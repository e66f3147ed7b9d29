"""The remote listener's ASGI app: what a client on the internet reaches through the person's TLS terminator.

It serves only:

- ``/mcp``: Streamable HTTP for OAuth access tokens of active remote grants (``RemoteTokenVerifier``), bound to
  this resource (the SDK's bearer middleware with ``validate_token_resource``); never a ``kms_`` token. Each
  grant is a session of the same ``SessionHub`` as the local listener's tokens (``SessionHub.for_token``):
  tools by its scopes, its identity, rate limits, read tracking, every write staged (``review_detached``);
- ``/.well-known/oauth-protected-resource/mcp`` (RFC 9728; also at the root path, for clients that probe
  there) and ``/.well-known/oauth-authorization-server``
  (RFC 8414, with ``authorization_response_iss_parameter_supported``), their issuer and resource strings
  spelled once (``RemoteSettings``);
- the authorization server's ``/authorize``, ``/token``, ``/register``, ``/revoke`` (the SDK's handlers over
  ``KmsOAuthProvider``) and ``/consent``;
- ``extra_public_routes``: what another part mounts here (the review pages behind the owner's login).

Nothing else: no ``/hooks``, no ``/health``. ``HttpGuard`` screens every request first: the Host must be the
public name exactly (421), an Origin the public origin or claude.ai's or ChatGPT's (403); a missing or dead
token on ``/mcp`` gets 401 with ``resource_metadata`` (how a client discovers the rest). A ``resource`` at the
token endpoint other than this ``/mcp`` is ``invalid_target``; registrations past the hourly limit get 429.
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

from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.routes import build_metadata, build_resource_metadata_url, cors_middleware, create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.routing import BaseRoute, Route

from server.activity import remote_grants
from server.config.remote import RemoteSettings
from server.config.scopes import ScopeError, Scopes
from server.config.tiers import TIERS
from server.mcp.http import EndingResponses, ScreenedBodies
from server.mcp.http_guard import MAX_BODY_BYTES, READ_TIMEOUT_S, HttpGuard, Origins, exact_security, typed_errors
from server.mcp.remote.consent import Consent
from server.mcp.remote.provider import SECRET_HASH, KmsOAuthProvider, RemoteTokenVerifier, same_resource
from server.store.db import service_folder, thread_connection

log = logging.getLogger("kms.service")
CLIENT_ORIGINS = ("https://claude.ai", "https://chatgpt.com")  # their servers call /token and /register
OPEN_BODY_BYTES = 64 * 1024  # a registration, a token or consent form: small bodies, no token to check first
SCOPES_SUPPORTED = [f"tier:{t}" for t in TIERS]


def remote_origins(settings: RemoteSettings) -> Origins:
    parts = urlsplit(settings.issuer)
    own = f"{parts.scheme}://{parts.netloc.lower()}"
    return Origins(settings.host_names, frozenset({own, *CLIENT_ORIGINS}))


def metadata_documents(settings: RemoteSettings) -> tuple[OAuthMetadata, ProtectedResourceMetadata]:
    """The two discovery documents, their issuer and resource spelled exactly as ``settings`` (no slash added)."""
    base = build_metadata(
        AnyHttpUrl(settings.issuer),
        None,
        ClientRegistrationOptions(enabled=True),
        RevocationOptions(enabled=True),
    ).model_dump(mode="json", exclude_none=True)
    authorization = OAuthMetadata.model_validate(
        {
            **base,
            "issuer": settings.issuer,
            "scopes_supported": SCOPES_SUPPORTED,
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
            "revocation_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
            "authorization_response_iss_parameter_supported": True,
            "client_id_metadata_document_supported": True,
        }
    )
    resource = ProtectedResourceMetadata.model_validate(
        {
            "resource": settings.resource,
            "authorization_servers": [settings.issuer],
            "scopes_supported": SCOPES_SUPPORTED,
            "resource_name": "kms",
        }
    )
    return authorization, resource


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
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


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
        return urlunsplit(
            parts._replace(query=(parts.query + "&" if parts.query else "") + urlencode({"iss": self.issuer}))
        )


class ScopeCheck:
    """The public ``/mcp``: a ``tools/call`` of a tool above the grant's tier is refused before it runs with 403
    ``insufficient_scope`` naming the scope it needs (the MCP authorization spec's step-up signal), rather than
    a tool error: the client may ask the person for a wider grant. (``tools/list`` already leaves such tools
    out; a tool the person's own settings turned off stays a tool error, ``feature-disabled``.)"""

    def __init__(self, app: Any, metadata_url: str) -> None:
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


def remote_app(
    hub: Any,
    settings: RemoteSettings,
    *,
    extra_public_routes: list[BaseRoute] | None = None,
    read_timeout: float = READ_TIMEOUT_S,
) -> HttpGuard:
    """The remote listener's app (module docstring) for the service's ``hub``."""
    from server.mcp.serve import build_server

    db_path = hub.services.db_path
    provider = KmsOAuthProvider(db_path, settings)
    verifier = RemoteTokenVerifier(db_path)
    authorization, resource = metadata_documents(settings)
    origins = remote_origins(settings)
    auth_routes: list[BaseRoute] = []
    for sdk_route in create_auth_routes(
        provider,
        AnyHttpUrl(settings.issuer),
        client_registration_options=ClientRegistrationOptions(enabled=True),
        revocation_options=RevocationOptions(enabled=True),
    ):
        route: Route = sdk_route
        if route.path == "/.well-known/oauth-authorization-server":
            route = Route(
                route.path,
                cors_middleware(MetadataHandler(authorization).handle, ["GET", "OPTIONS"]),
                methods=["GET", "OPTIONS"],
            )
        elif route.path == "/token":
            route.app = SecretCheck(TargetCheck(route.app, settings.resource), db_path)
        elif route.path == "/revoke":
            route.app = SecretCheck(route.app, db_path)
        elif route.path == "/register":
            route.app = RegistrationLimit(route.app, db_path)
        elif route.path == "/authorize":
            route.app = IssOnRedirects(route.app, settings.issuer)
        auth_routes.append(route)
    metadata_path = urlsplit(str(build_resource_metadata_url(AnyHttpUrl(settings.resource)))).path
    metadata_url = f"{settings.issuer}{metadata_path}"
    for path in (metadata_path, "/.well-known/oauth-protected-resource"):  # the root too: clients that probe it
        auth_routes.append(
            Route(
                path,
                cors_middleware(ProtectedResourceMetadataHandler(resource).handle, ["GET", "OPTIONS"]),
                methods=["GET", "OPTIONS"],
            )
        )
    auth_routes.append(Route("/consent", Consent(db_path, settings).handle, methods=["GET", "POST"]))
    server = build_server(hub)
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(settings.issuer),
        resource_server_url=AnyHttpUrl(settings.resource),
        validate_token_resource=True,
    )
    app = server.streamable_http_app(
        host=urlsplit(settings.issuer).hostname or "",
        token_verifier=verifier,
        auth=auth,
        max_request_body_size=MAX_BODY_BYTES,
        transport_security=exact_security(origins),
    )
    # the SDK's own protected-resource route (its issuer spelled by pydantic) gives way to ours
    app.router.routes[:] = [
        r for r in app.routes if not getattr(r, "path", "").startswith("/.well-known/oauth-protected-resource")
    ]
    app.router.routes.extend([*auth_routes, *(extra_public_routes or [])])
    for served in app.routes:
        if isinstance(served, Route) and served.path == "/mcp":
            served.app = ScreenedBodies(EndingResponses(ScopeCheck(served.app, metadata_url), db_path))
    typed_errors(app)

    async def live(token: str) -> bool:
        found = await verifier.verify_token(token)
        return found is not None and same_resource(found.resource, settings.resource)

    async def why(_token: str) -> str:
        return "an OAuth access token of an active remote grant is required (connect the client again)"

    challenge = f'Bearer error="invalid_token", resource_metadata="{metadata_url}"'.encode()
    return HttpGuard(
        ForwardingSeen(app, db_path),
        origins=origins,
        verify=live,
        read_timeout=read_timeout,
        why=why,
        challenge=challenge,
        open_limit=OPEN_BODY_BYTES,
    )
