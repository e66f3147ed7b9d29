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

from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.routes import build_metadata, build_resource_metadata_url, cors_middleware, create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.routing import BaseRoute, Route

from server.config.remote import RemoteSettings
from server.config.tiers import TIERS
from server.mcp.http import EndingResponses, ScreenedBodies
from server.mcp.http_guard import (
    MAX_BODY_BYTES,
    READ_TIMEOUT_S,
    HttpGuard,
    OncePerRequest,
    Origins,
    exact_security,
    typed_errors,
)
from server.mcp.remote.consent import Consent
from server.mcp.remote.provider import KmsOAuthProvider, RemoteTokenVerifier, same_resource
from server.mcp.remote.screens import (
    ForwardingSeen,
    IssOnRedirects,
    RegistrationLimit,
    ScopeCheck,
    SecretCheck,
    TargetCheck,
)
from server.mcp.serve import build_server

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


def remote_app(
    hub: Any,
    settings: RemoteSettings,
    *,
    extra_public_routes: list[BaseRoute] | None = None,
    read_timeout: float = READ_TIMEOUT_S,
) -> HttpGuard:
    """The remote listener's app (module docstring) for the service's ``hub``."""

    db_path = hub.services.db_path
    provider = KmsOAuthProvider(db_path, settings)
    verifier = OncePerRequest(RemoteTokenVerifier(db_path))  # checked by HttpGuard, then by the SDK: read once
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
