"""Remote mode's settings as one value (``remote.*``, docs/remote.md): read once when the listener opens.

The public origin (``remote.url``) is the OAuth issuer, its ``/mcp`` the one resource tokens are issued for;
both strings are spelled here once, exactly (RFC 8414 and RFC 9728 compare them as strings).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from server.config.scopes import Scopes
from server.config.settings import Settings

# redirect URIs every kms accepts, with the name the person knows the client by
KNOWN_REDIRECTS: dict[str, str] = {
    "https://claude.ai/api/mcp/auth_callback": "claude.ai",
    "https://chatgpt.com/connector_platform_oauth_redirect": "ChatGPT",
}


@dataclass(frozen=True)
class RemoteSettings:
    enabled: bool
    url: str | None  # the public origin, no trailing slash (None: not set)
    port: int
    max_scopes: Scopes
    redirect_uris: tuple[str, ...]
    fetch_client_metadata: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> RemoteSettings:
        url = settings.get("remote.url")
        return cls(
            enabled=bool(settings.get("remote.enabled")),
            url=url.rstrip("/") if url else None,
            port=int(settings.get("remote.port")),
            max_scopes=Scopes.parse(settings.get("remote.max_scopes") or "tier:read"),
            redirect_uris=tuple((settings.get("remote.redirect_uris") or "").split()),
            fetch_client_metadata=bool(settings.get("remote.fetch_client_metadata")),
        )

    @property
    def active(self) -> bool:
        """Whether the service should open the remote listener (on, and an address to answer at)."""
        return self.enabled and self.url is not None

    @property
    def issuer(self) -> str:
        return self.url or ""

    @property
    def resource(self) -> str:
        return f"{self.issuer}/mcp"

    @property
    def host_names(self) -> frozenset[str]:
        """The Host header values the public listener answers: the public name (with its port, or the
        scheme's default port spelled or not)."""
        parts = urlsplit(self.issuer)
        netloc = parts.netloc.lower()
        default = {"https": 443, "http": 80}[parts.scheme]
        names = {netloc}
        if parts.port is None:
            names.add(f"{netloc}:{default}")
        elif parts.port == default:
            names.add(netloc.rsplit(":", 1)[0])
        return frozenset(names)
