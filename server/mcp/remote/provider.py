"""kms's OAuth authorization server: the SDK's ``OAuthAuthorizationServerProvider`` over kms's database.

The SDK (``mcp.server.auth``) parses and answers ``/authorize``, ``/token``, ``/register`` and ``/revoke``
(PKCE S256 only, redirect URI and client checks, code expiry); this provider decides and stores
(``server.activity.remote_grants``): ``authorize`` sends the person to the consent page
(``server.mcp.remote.consent``) instead of minting a code, the code is made there once the person proved
they hold the machine, and the token rules (rotation, reuse, replay, the grant's end) are the store's.

A confidential client's secret is stored as its hash: the SDK's own client check compares the stored secret
itself, so such a client is handed to the SDK as a public one, its secret checked first by
``server.mcp.remote.app.SecretCheck``.

``RemoteTokenVerifier`` is the public ``/mcp``'s bearer check: an access token stands for its grant's kms
token, so the session, ``EndingResponses`` and ``kms token revoke`` work as for a local token.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from server.activity import remote_grants, tokens
from server.config.remote import RemoteSettings
from server.errors import KmsError
from server.mcp.remote.clients import KmsClient, display_name, fetch_document, pinned_client, redirect_allowed
from server.store.db import thread_connection

SECRET_HASH = "client_secret_sha256"  # a confidential client's secret, as stored


def same_resource(given: str | None, ours: str) -> bool:
    """RFC 8707: the resource a client names is this listener's ``/mcp`` (a trailing slash aside)."""
    return given is not None and given.rstrip("/") == ours.rstrip("/")


class KmsOAuthProvider:
    """See the module docstring. ``db_path``: the service's database; ``settings``: remote mode's, as the
    listener opened."""

    def __init__(self, db_path: Any, settings: RemoteSettings) -> None:
        self.db_path = db_path
        self.settings = settings

    def _conn(self) -> Any:
        return thread_connection(self.db_path)

    async def _write(self, fn: Any) -> Any:
        return await anyio.to_thread.run_sync(fn)

    # ------------------------------------------------------------------ clients

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        pinned = pinned_client(client_id)
        if pinned is not None:
            return pinned
        if client_id.startswith("https://"):
            if not self.settings.fetch_client_metadata:
                return None
            found = await anyio.to_thread.run_sync(fetch_document, client_id)
            if found is None or not all(redirect_allowed(str(u), self.settings) for u in found.redirect_uris or []):
                return None
            return found
        info = remote_grants.load_client(self._conn(), client_id)
        if info is None:
            return None
        if SECRET_HASH in info:  # its secret is checked by hash before the SDK sees the request (SecretCheck)
            info = {**info, "token_endpoint_auth_method": "none"}
        return KmsClient.model_validate(info)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        uris = [str(u) for u in client_info.redirect_uris or []]
        refused = [u for u in uris if not redirect_allowed(u, self.settings)]
        if not uris or refused:
            raise RegistrationError(
                "invalid_redirect_uri",
                f"redirect URI not allowed here: {refused[0] if refused else 'none given'} (claude.ai's, "
                "ChatGPT's, loopback, or one in remote.redirect_uris)",
            )
        info = client_info.model_dump(mode="json", exclude_none=True)
        secret = info.pop("client_secret", None)
        if secret:  # kept as its hash only; the registration's answer still gives it to the client, once
            info[SECRET_HASH] = remote_grants.digest(secret)
        try:
            await self._write(lambda: remote_grants.save_client(self._conn(), client_info.client_id, info))
        except KmsError as e:
            raise RegistrationError("invalid_client_metadata", e.message) from None

    # ------------------------------------------------------------------ authorization

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if len(params.code_challenge) != 43:  # S256 of any verifier: 32 bytes, base64url without padding
            raise AuthorizeError("invalid_request", "code_challenge must be the S256 challenge (43 characters)")
        resource = params.resource if params.resource is not None else self.settings.resource
        if not same_resource(resource, self.settings.resource):
            raise AuthorizeError("invalid_target", f"this server issues tokens only for {self.settings.resource}")
        uris = [str(u) for u in client.redirect_uris or []]
        pending = {
            "redirect_uri": str(params.redirect_uri),
            "explicit": params.redirect_uri_provided_explicitly,
            "code_challenge": params.code_challenge,
            "state": params.state,
            "scopes": " ".join(params.scopes or []),
            "resource": self.settings.resource,
            "client_name": display_name(uris, client.client_name),
        }
        try:
            key, _csrf = await self._write(lambda: remote_grants.open_request(self._conn(), client.client_id, pending))
        except KmsError as e:
            raise AuthorizeError("temporarily_unavailable", e.message) from None
        return f"{self.settings.issuer}/consent?request={key}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        found = await self._write(lambda: remote_grants.load_code(self._conn(), authorization_code))
        if found is None:
            return None
        return AuthorizationCode(
            code=authorization_code,
            scopes=found["scopes"].split(),
            expires_at=found["expires_at"],
            client_id=found["client_id"],
            code_challenge=found["code_challenge"],
            redirect_uri=found["redirect_uri"],
            redirect_uri_provided_explicitly=found["explicit"],
            resource=found["resource"],
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        try:
            issued = await self._write(lambda: remote_grants.exchange_code(self._conn(), authorization_code.code))
        except KmsError as e:
            raise TokenError("invalid_grant", e.message) from None
        return _oauth_token(issued)

    # ------------------------------------------------------------------ refresh and revocation

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = await self._write(lambda: remote_grants.load_refresh(self._conn(), refresh_token))
        if found is None:
            return None
        return RefreshToken(
            token=refresh_token,
            client_id=found.client_id,
            scopes=found.scopes.split(),
            expires_at=int(found.expires_at),
            resource=found.resource,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        try:
            issued = await self._write(
                lambda: remote_grants.rotate_refresh(self._conn(), refresh_token.token, " ".join(scopes))
            )
        except KmsError as e:
            raise TokenError("invalid_grant", e.message) from None
        return _oauth_token(issued)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = remote_grants.check_access(self._conn(), token)
        if found is None:
            return None
        return AccessToken(
            token=token,
            client_id=found.client_id,
            scopes=found.scopes.split(),
            expires_at=int(found.expires_at),
            resource=found.resource,
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        await self._write(lambda: remote_grants.revoke_presented(self._conn(), token.token))

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "the JWT bearer grant is not supported here")


def _oauth_token(issued: remote_grants.Issued) -> OAuthToken:
    return OAuthToken(
        access_token=issued.access_token,
        expires_in=issued.expires_in,
        scope=issued.scopes,
        refresh_token=issued.refresh_token,
    )


class RemoteTokenVerifier:
    """The public ``/mcp``'s ``TokenVerifier``: a live access token of an active grant (one indexed read), as
    the grant's kms token (``client_id``: its id, ``subject``: its session), with the resource it was issued
    for (the SDK's bearer middleware refuses any other). A ``kms_`` token is never one."""

    def __init__(self, db_path: Any) -> None:
        self.db_path = db_path

    async def verify_token(self, token: str) -> AccessToken | None:
        now = time.time()
        found = remote_grants.check_access(thread_connection(self.db_path), token, now=now)
        if found is None:
            return None
        if found.last_used_at is None or now - found.last_used_at >= tokens.LAST_USED_EVERY_S:
            await anyio.to_thread.run_sync(lambda: tokens.mark_used(thread_connection(self.db_path), found.token_id))
        return AccessToken(
            token="",
            client_id=found.token_id,
            scopes=found.scopes.split(),
            subject=found.session_id,
            expires_at=int(found.expires_at),
            resource=found.resource,
        )
