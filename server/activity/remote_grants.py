"""Remote grants: what the person consented to give one OAuth client (claude.ai, ChatGPT), and its tokens.

Remote mode (docs/remote.md) lets clients on the internet reach kms through OAuth 2.1; this module is its
store, with the token rules, and knows nothing of HTTP or of the SDK (``server.mcp.remote`` adapts it).

- A **grant** stands on a kms token of kind ``remote`` (``server.activity.tokens``): that row gives it its
  session (provenance, rate limits, read tracking, the dashboard), its scopes, its end (``GRANT_S`` after
  consent, whatever its refreshes) and its revocation (``kms token revoke`` ends it at its next request, open
  streams too). The token's own secret is never shown: the grant's access tokens reach it.
- **Access tokens** (``ACCESS_S``) and **refresh tokens** (``REFRESH_S``, rotated at every use) are kept as
  SHA-256 hashes, bound to the one resource (the public ``/mcp``) they were issued for. Presenting a refresh
  token again once it was rotated ends the whole grant (someone holds a copy); so does presenting an
  authorization code again once it was exchanged (``CODE_S``, single use).
- **Clients** are kept as the metadata they registered (RFC 7591); registrations are rate-limited
  (``REGISTRATIONS_PER_HOUR``) and the ones never used are swept after ``UNUSED_CLIENT_S``.
- **Authorization requests** wait for the person's consent for ``REQUEST_S`` (the consent page's key and its
  CSRF token); at most ``MAX_WAITING_REQUESTS`` wait at once.

Every secret here is ``secrets.token_urlsafe(32)`` behind a prefix that is never ``kms_`` (the local
listener's tokens): ``kmo_at_`` access, ``kmo_rt_`` refresh, ``kmo_ac_`` code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apsw

from server.activity import tokens
from server.config.scopes import Scopes
from server.errors import KmsError
from server.store.db import rows, shared_commit, write_tx

ACCESS_S = 3600.0
REFRESH_S = 30 * 86400.0
GRANT_S = 90 * 86400.0
CODE_S = 300.0
REQUEST_S = 600.0
UNUSED_CLIENT_S = 86400.0
REGISTRATIONS_PER_HOUR = 30
MAX_WAITING_REQUESTS = 50  # authorization requests waiting for consent at once (each lives REQUEST_S)
ACCESS_PREFIX, REFRESH_PREFIX, CODE_PREFIX = "kmo_at_", "kmo_rt_", "kmo_ac_"
VIA = " via remote"  # a grant's identity: "<client name> via remote" (provenance, the dashboard)


@contextlib.contextmanager
def _tx(conn: apsw.Connection) -> Iterator[None]:
    """One write transaction that the writes of other modules called inside it join (savepoints)."""
    with shared_commit(conn), write_tx(conn):
        yield


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


# ----------------------------------------------------------------------------- clients


def save_client(conn: apsw.Connection, client_id: str, info: dict[str, Any], *, now: float | None = None) -> None:
    """Keep a registered client; ``rate-limited`` past ``REGISTRATIONS_PER_HOUR`` in the last hour. Clients
    registered more than ``UNUSED_CLIENT_S`` ago and never granted anything are swept first."""
    now = time.time() if now is None else now
    sweep_clients(conn, now=now)
    with write_tx(conn):
        if not registration_open(conn, now=now):
            raise KmsError("rate-limited", "too many client registrations in the last hour; try again later")
        conn.execute(
            "INSERT INTO oauth_clients (client_id, info, created_at) VALUES (?, ?, ?)",
            (client_id, json.dumps(info), now),
        )


def registration_open(conn: apsw.Connection, *, now: float | None = None) -> bool:
    """Whether one more client may register now (fewer than ``REGISTRATIONS_PER_HOUR`` in the last hour)."""
    now = time.time() if now is None else now
    recent = rows(conn, "SELECT count(*) AS n FROM oauth_clients WHERE created_at > ?", (now - 3600,))
    return int(recent[0]["n"]) < REGISTRATIONS_PER_HOUR


def load_client(conn: apsw.Connection, client_id: str) -> dict[str, Any] | None:
    found = rows(conn, "SELECT info FROM oauth_clients WHERE client_id = ?", (client_id,))
    return json.loads(found[0]["info"]) if found else None


def sweep_clients(conn: apsw.Connection, *, now: float | None = None) -> int:
    """Forget the registrations older than ``UNUSED_CLIENT_S`` that no grant was ever made for."""
    now = time.time() if now is None else now
    with write_tx(conn):
        conn.execute(
            "DELETE FROM oauth_clients WHERE created_at < ? AND client_id NOT IN (SELECT client_id FROM oauth_grants)",
            (now - UNUSED_CLIENT_S,),
        )
        conn.execute("DELETE FROM oauth_requests WHERE expires_at < ?", (now,))
        conn.execute("DELETE FROM oauth_codes WHERE expires_at < ? AND used_at IS NULL", (now - CODE_S,))
        return conn.changes()


# ----------------------------------------------------------------------------- authorization requests


@dataclass(frozen=True)
class PendingRequest:
    """An authorization request waiting for the person on the consent page."""

    client_id: str
    params: dict[str, Any]  # what the code will carry: redirect_uri, code_challenge, scopes, resource, state
    csrf: str


def open_request(
    conn: apsw.Connection, client_id: str, params: dict[str, Any], *, now: float | None = None
) -> tuple[str, str]:
    """(the consent page's key, its CSRF token) for an authorization request; only the key's hash is kept."""
    now = time.time() if now is None else now
    key, csrf = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    with write_tx(conn):
        conn.execute("DELETE FROM oauth_requests WHERE expires_at < ?", (now,))
        waiting = rows(conn, "SELECT count(*) AS n FROM oauth_requests")
        if int(waiting[0]["n"]) >= MAX_WAITING_REQUESTS:
            raise KmsError("rate-limited", "too many authorizations are waiting for consent; try again later")
        conn.execute(
            "INSERT INTO oauth_requests (hash, client_id, params, csrf, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (digest(key), client_id, json.dumps(params), csrf, now, now + REQUEST_S),
        )
    return key, csrf


def get_request(conn: apsw.Connection, key: str, *, now: float | None = None) -> PendingRequest | None:
    now = time.time() if now is None else now
    found = rows(conn, "SELECT * FROM oauth_requests WHERE hash = ? AND expires_at > ?", (digest(key), now))
    if not found:
        return None
    return PendingRequest(found[0]["client_id"], json.loads(found[0]["params"]), found[0]["csrf"])


def close_request(conn: apsw.Connection, key: str) -> None:
    with write_tx(conn):
        conn.execute("DELETE FROM oauth_requests WHERE hash = ?", (digest(key),))


# ----------------------------------------------------------------------------- codes


def issue_code(conn: apsw.Connection, client_id: str, params: dict[str, Any], *, now: float | None = None) -> str:
    """A single-use authorization code for what the person consented to (``params``: the scopes chosen,
    the client's name, the redirect URI, the PKCE challenge, the resource)."""
    now = time.time() if now is None else now
    code = _secret(CODE_PREFIX)
    with write_tx(conn):
        conn.execute(
            "INSERT INTO oauth_codes (hash, grant_id, client_id, params, created_at, expires_at) "
            "VALUES (?, '', ?, ?, ?, ?)",
            (digest(code), client_id, json.dumps(params), now, now + CODE_S),
        )
    return code


def load_code(conn: apsw.Connection, code: str, *, now: float | None = None) -> dict[str, Any] | None:
    """The code's params (with ``client_id`` and ``expires_at``), None if unknown. A code presented again after
    it was exchanged is a replay: the grant it minted is revoked, and None."""
    found = rows(conn, "SELECT * FROM oauth_codes WHERE hash = ?", (digest(code),))
    if not found:
        return None
    row = found[0]
    if row["used_at"] is not None:
        if row["grant_id"]:
            revoke_grant(conn, row["grant_id"], now=now)
        return None
    return {**json.loads(row["params"]), "client_id": row["client_id"], "expires_at": row["expires_at"]}


@dataclass(frozen=True)
class Issued:
    """What a token request answers: the pair of tokens and what they allow."""

    grant_id: str
    access_token: str
    refresh_token: str
    expires_in: int
    scopes: str


def exchange_code(conn: apsw.Connection, code: str, *, now: float | None = None) -> Issued:
    """The grant the code's consent makes (its kms token, its session) and its first tokens. ``invalid-input``
    for a code already exchanged (it raced another exchange: the grant that one made is revoked)."""
    now = time.time() if now is None else now
    with _tx(conn):
        found = rows(conn, "SELECT * FROM oauth_codes WHERE hash = ? AND used_at IS NULL", (digest(code),))
        if found:
            row = found[0]
            params = json.loads(row["params"])
            grant_id = "g" + secrets.token_hex(6)
            token, _secret_never_shown = tokens.create(
                conn,
                label=f"{params['client_name']}{VIA} [{grant_id}]",
                scopes=Scopes.parse(params["scopes"]),
                kind="remote",
                expires_in_s=GRANT_S,
                now=now,
            )
            conn.execute(
                "INSERT INTO oauth_grants (id, client_id, token_id, resource, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (grant_id, row["client_id"], token.id, params["resource"], now, now + GRANT_S),
            )
            conn.execute(
                "UPDATE oauth_codes SET used_at = ?, grant_id = ? WHERE hash = ?", (now, grant_id, row["hash"])
            )
            conn.execute("UPDATE oauth_clients SET used_at = ? WHERE client_id = ?", (now, row["client_id"]))
            return _mint(conn, grant_id, params["scopes"], params["resource"], now, now + GRANT_S)
    load_code(conn, code, now=now)  # exchanged meanwhile (a race): the replay's rule, its grant revoked
    raise KmsError("invalid-input", "this authorization code was used already")


def _mint(conn: apsw.Connection, grant_id: str, scopes: str, resource: str, now: float, ends: float) -> Issued:
    """A new pair for the grant; its tokens past their end are forgotten (a rotated refresh token is kept until
    then, so that its reuse is seen)."""
    conn.execute("DELETE FROM oauth_tokens WHERE grant_id = ? AND expires_at < ?", (grant_id, now))
    access, refresh = _secret(ACCESS_PREFIX), _secret(REFRESH_PREFIX)
    access_ends = min(now + ACCESS_S, ends)
    for kind, secret, until in (("access", access, access_ends), ("refresh", refresh, min(now + REFRESH_S, ends))):
        conn.execute(
            "INSERT INTO oauth_tokens (hash, kind, grant_id, scopes, resource, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (digest(secret), kind, grant_id, scopes, resource, now, until),
        )
    return Issued(grant_id, access, refresh, max(1, int(access_ends - now)), scopes)


# ----------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class GrantToken:
    """An active access or refresh token, with the grant and kms token it stands on."""

    grant_id: str
    client_id: str
    token_id: str  # the grant's kms token (kind ``remote``)
    session_id: str
    scopes: str
    resource: str
    expires_at: float
    last_used_at: float | None


_ACTIVE = """SELECT o.grant_id, g.client_id, g.token_id, t.session_id, o.scopes, o.resource, o.expires_at,
    t.last_used_at, o.rotated_at FROM oauth_tokens o JOIN oauth_grants g ON g.id = o.grant_id
    JOIN tokens t ON t.id = g.token_id
    WHERE o.hash = ? AND o.kind = ? AND o.revoked_at IS NULL AND o.expires_at > ? AND t.revoked_at IS NULL
    AND (t.expires_at IS NULL OR t.expires_at > ?)"""


def _found(row: dict[str, Any]) -> GrantToken:
    return GrantToken(
        row["grant_id"],
        row["client_id"],
        row["token_id"],
        row["session_id"],
        row["scopes"],
        row["resource"],
        row["expires_at"],
        row["last_used_at"],
    )


def check_access(conn: apsw.Connection, presented: str, *, now: float | None = None) -> GrantToken | None:
    """The live access token ``presented`` is (one indexed read), else None: unknown, expired, revoked, or its
    grant ended. Runs on every request of the remote listener."""
    if not presented.startswith(ACCESS_PREFIX) or len(presented) > 200:
        return None
    now = time.time() if now is None else now
    found = rows(conn, _ACTIVE, (digest(presented), "access", now, now))
    return _found(found[0]) if found else None


def load_refresh(conn: apsw.Connection, presented: str, *, now: float | None = None) -> GrantToken | None:
    """The live refresh token ``presented`` is, else None. One that was rotated already is being reused: its
    whole grant is revoked (RFC 9700 §4.14.2), and None."""
    if not presented.startswith(REFRESH_PREFIX) or len(presented) > 200:
        return None
    now = time.time() if now is None else now
    found = rows(conn, _ACTIVE.replace("AND o.revoked_at IS NULL ", ""), (digest(presented), "refresh", now, now))
    if not found:
        return None
    if found[0]["rotated_at"] is not None:
        revoke_grant(conn, found[0]["grant_id"], now=now)
        return None
    return _found(found[0])


def rotate_refresh(conn: apsw.Connection, presented: str, scopes: str, *, now: float | None = None) -> Issued:
    """A new pair for a refresh token, which is spent. A refresh token spent meanwhile (two uses raced) ends
    the grant: ``invalid-input``."""
    now = time.time() if now is None else now
    with _tx(conn):
        conn.execute(
            "UPDATE oauth_tokens SET rotated_at = ? WHERE hash = ? AND kind = 'refresh' AND rotated_at IS NULL "
            "AND revoked_at IS NULL",
            (now, digest(presented)),
        )
        spent = conn.changes() == 1
        found = rows(
            conn,
            "SELECT o.grant_id, o.resource, g.expires_at FROM oauth_tokens o JOIN oauth_grants g ON g.id = o.grant_id "
            "WHERE o.hash = ?",
            (digest(presented),),
        )
        if spent and found:
            return _mint(conn, found[0]["grant_id"], scopes, found[0]["resource"], now, found[0]["expires_at"])
    if not found:
        raise KmsError("invalid-input", "unknown refresh token")
    revoke_grant(conn, found[0]["grant_id"], now=now)
    raise KmsError("invalid-input", "this refresh token was used already: its grant is revoked")


def revoke_presented(conn: apsw.Connection, presented: str, *, now: float | None = None) -> None:
    """RFC 7009: the client gives up a token; its whole grant ends with it (access and refresh alike)."""
    found = rows(conn, "SELECT grant_id FROM oauth_tokens WHERE hash = ?", (digest(presented),))
    if found:
        revoke_grant(conn, found[0]["grant_id"], now=now)


# ----------------------------------------------------------------------------- grants


def list_grants(
    conn: apsw.Connection, *, include_ended: bool = False, now: float | None = None
) -> list[dict[str, Any]]:
    """The remote grants, newest first: client, scopes, since, until, last use, state and the kms token and
    session each stands on (``kms token list`` shows the same token)."""
    now = time.time() if now is None else now
    out = []
    for row in rows(
        conn,
        "SELECT g.*, t.scopes, t.label, t.session_id, t.last_used_at, t.revoked_at, c.info FROM oauth_grants g "
        "JOIN tokens t ON t.id = g.token_id LEFT JOIN oauth_clients c ON c.client_id = g.client_id "
        "ORDER BY g.created_at DESC",
    ):
        state = "revoked" if row["revoked_at"] is not None else "expired" if row["expires_at"] <= now else "active"
        if state != "active" and not include_ended:
            continue
        out.append(
            {
                "id": row["id"],
                "client": identity(row["label"]).removesuffix(VIA),
                "clientId": row["client_id"],
                "scopes": row["scopes"],
                "createdAt": row["created_at"],
                "expiresAt": row["expires_at"],
                "lastUsedAt": row["last_used_at"],
                "state": state,
                "tokenId": row["token_id"],
                "sessionId": row["session_id"],
            }
        )
    return out


def revoke_grant(conn: apsw.Connection, grant_id: str, *, now: float | None = None) -> dict[str, Any]:
    """End a grant (by its id or its kms token's): its token revoked, every access and refresh token with it.
    Its next request is refused, an open stream ends within seconds (``server.mcp.http.EndingResponses``)."""
    now = time.time() if now is None else now
    with _tx(conn):
        found = rows(conn, "SELECT id, token_id FROM oauth_grants WHERE id = ? OR token_id = ?", (grant_id, grant_id))
        if not found:
            raise KmsError("not-found", f"no remote grant {grant_id!r} (kms token list shows them)")
        gid, token_id = found[0]["id"], found[0]["token_id"]
        tokens.revoke(conn, token_id, now=now)
        conn.execute("UPDATE oauth_tokens SET revoked_at = ? WHERE grant_id = ? AND revoked_at IS NULL", (now, gid))
    return next(g for g in list_grants(conn, include_ended=True, now=now) if g["id"] == gid)


def identity(label: str) -> str:
    """A grant's identity from its kms token's label (``"claude.ai via remote [g1a2b]"``): ``claude.ai via
    remote``, as provenance and the dashboard name its session."""
    return label.rsplit(" [", 1)[0] if label.endswith("]") else label
