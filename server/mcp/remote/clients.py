"""Which OAuth clients remote mode talks to, and where it may send their codes.

- **Redirect URIs** (``redirect_allowed``): claude.ai's and ChatGPT's callbacks (``KNOWN_REDIRECTS``), the
  person's own (``remote.redirect_uris``, exact), and loopback ``http://127.0.0.1``, ``http://[::1]`` or
  ``http://localhost`` on any port (RFC 8252 §7.3: a CLI's callback). Nothing else registers:
  ``https://localhost.evil.test/`` is a foreign host, not loopback.
- **Client ID metadata documents** (a URL as ``client_id``): the known ones (Claude, Claude Code) are pinned
  here, never fetched (claude.ai's answers a datacenter fetch with a bot challenge). Any other URL is refused
  unless ``remote.fetch_client_metadata`` is on; then it is fetched with SSRF guards (``fetch_document``).
- ``KmsClient``: the SDK's client record with kms's rules for scopes (kms's grammar; other words dropped) and
  loopback ports.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any
from urllib.parse import urlsplit

from mcp.shared.auth import InvalidRedirectUriError, OAuthClientInformationFull
from pydantic import AnyUrl

from server.config.remote import KNOWN_REDIRECTS, RemoteSettings
from server.config.scopes import ScopeError, Scopes

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
DOCUMENT_MAX_BYTES = 64 * 1024
DOCUMENT_TIMEOUT_S = 5.0

PINNED: dict[str, dict[str, Any]] = {
    "https://claude.ai/oauth/mcp-oauth-client-metadata": {
        "client_name": "claude.ai",
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
    },
    "https://claude.ai/oauth/claude-code-client-metadata": {
        "client_name": "Claude Code",
        "redirect_uris": ["http://localhost/callback", "http://127.0.0.1/callback"],
    },
}


def is_loopback_redirect(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS and not parts.username


def redirect_allowed(uri: str, settings: RemoteSettings) -> bool:
    """Whether a client may register (or a pinned client use) ``uri`` as its redirect."""
    return uri in KNOWN_REDIRECTS or uri in settings.redirect_uris or is_loopback_redirect(uri)


def display_name(redirect_uris: list[str], client_name: str | None) -> str:
    """The name the person sees (consent page, provenance, the dashboard): a known callback's owner, else the
    name the client gave (one line, 60 characters), else its redirect's host."""
    for uri in redirect_uris:
        if uri in KNOWN_REDIRECTS:
            return KNOWN_REDIRECTS[uri]
    name = " ".join((client_name or "").split())[:60]
    return name or (urlsplit(redirect_uris[0]).hostname or "a client" if redirect_uris else "a client")


def _same_loopback(registered: str, presented: str) -> bool:
    """RFC 8252 §7.3: a loopback redirect matches whatever its port; all else must be equal."""
    a, b = urlsplit(registered), urlsplit(presented)
    return (
        is_loopback_redirect(registered)
        and is_loopback_redirect(presented)
        and (a.scheme, a.hostname, a.path, a.query) == (b.scheme, b.hostname, b.path, b.query)
    )


class KmsClient(OAuthClientInformationFull):
    """A client as remote mode knows it: scopes in kms's grammar (clamped at consent, not at registration),
    and its loopback redirect on whatever port the CLI listens on today."""

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        """The words of kms's grammar the client asks for; others (``offline_access``, ``openid``, a client's
        own) are dropped rather than refused: the person chooses the grant's scopes on the consent page."""
        if requested_scope is None:
            return None
        return [word for word in requested_scope.split() if _kms_scope(word)]

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        registered = [str(u) for u in self.redirect_uris or []]
        if redirect_uri is not None:
            presented = str(redirect_uri)
            if presented in registered or any(_same_loopback(r, presented) for r in registered):
                return redirect_uri
            raise InvalidRedirectUriError(f"Redirect URI '{redirect_uri}' not registered for client")
        return super().validate_redirect_uri(redirect_uri)


def _kms_scope(word: str) -> bool:
    try:
        return not Scopes.parse(word).admin
    except ScopeError:
        return False


def pinned_client(client_id: str) -> KmsClient | None:
    known = PINNED.get(client_id)
    if known is None:
        return None
    return KmsClient(client_id=client_id, token_endpoint_auth_method="none", **known)


def public_address(host: str) -> bool:
    """Whether every address ``host`` resolves to is a public one (no loopback, private, link-local, ...)."""
    try:
        infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global or address.is_multicast:
            return False
    return bool(infos)


def fetch_document(client_id: str) -> KmsClient | None:
    """A client's metadata document fetched from its URL id (``remote.fetch_client_metadata`` on): https on
    port 443 only, a public address only (checked before connecting), no redirect followed, at most
    ``DOCUMENT_MAX_BYTES`` within ``DOCUMENT_TIMEOUT_S``; it must name itself and list only allowed redirects
    (checked by the caller). None: refused or unreachable. (A resolver that answers differently at connect
    time is not defended against beyond the check here.)"""
    import httpx

    parts = urlsplit(client_id)
    if parts.scheme != "https" or not parts.hostname or parts.port not in (None, 443) or parts.username:
        return None
    if not public_address(parts.hostname):
        return None
    try:
        with httpx.Client(timeout=DOCUMENT_TIMEOUT_S, follow_redirects=False) as client:
            with client.stream("GET", client_id, headers={"accept": "application/json"}) as reply:
                if reply.status_code != 200:
                    return None
                body = b""
                for chunk in reply.iter_bytes():
                    body += chunk
                    if len(body) > DOCUMENT_MAX_BYTES:
                        return None
        data = json.loads(body)
        if not isinstance(data, dict) or data.get("client_id") != client_id:
            return None
        return KmsClient.model_validate({**data, "client_secret": None, "token_endpoint_auth_method": "none"})
    except (httpx.HTTPError, ValueError):
        return None
