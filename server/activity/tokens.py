"""Bearer tokens for the kms service: who may reach it, as which session, with which scopes.

A token is printed once (``kms_<id>_<secret>``) and only the SHA-256 of its secret is stored (m021), so
the database never holds a usable token. Each token stands for one kms session (``session_id``):
provenance, rate limits and read tracking of every call made with it key on that session. ``kind``
says who it was made for: ``session`` (one ``kms claude`` session: a lease its launcher renews, revoked when
it ends or the service serving it stops, lapsing soon after the launcher dies), ``host`` (an agent host's
standing entry, ``kms mcp-config --http``), ``admin`` (the person's own tools) or ``remote`` (a remote OAuth
grant's session, ``server.activity.remote_grants``: its secret is never shown, the grant's own tokens reach it).

``verify`` is the one check: the token exists, its secret matches (constant-time), it is neither revoked
nor expired. It runs on every request, so a revoked or expired token fails at its next request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from server.config.allowlist import Allowlist, describe
from server.config.env_names import positive_seconds
from server.config.scopes import Scopes
from server.config.session_contract import SessionConfig, new_session_id
from server.config.tiers import TIERS, tier_enabled
from server.errors import KmsError
from server.store.db import rows, service_folder, write_tx
from server.vault.registry import list_vaults

KINDS = ("session", "host", "admin", "remote")
PREFIX = "kms_"
LAST_USED_EVERY_S = 30.0  # how stale ``last_used_at`` may be (one write per token per half minute at most)


@dataclass(frozen=True)
class Token:
    """A token as stored: never its secret."""

    id: str
    label: str
    kind: str
    scopes: Scopes
    session_id: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    last_used_at: float | None
    config: dict[str, str] | None = None  # a launcher session's contract (``SessionConfig.to_env``), else None
    writes: str = "active"  # its session's control (``kms session pause|revoke``): active, paused or revoked

    def state(self, now: float) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return "active"

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "kind": self.kind,
            "scopes": self.scopes.text(),
            "sessionId": self.session_id,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
            "revokedAt": self.revoked_at,
            "lastUsedAt": self.last_used_at,
            "state": self.state(now),
            "writes": self.writes,
        }

    def renewal(self) -> str:
        """How the person replaces this token (a host token stands for one session for good: a revoked session
        is never restarted, only a new token gets a new one)."""
        host = self.label.removeprefix("host:")
        if self.kind == "host" and host != self.label:
            return f"`kms mcp-config {host} --http`"
        return f"`kms token create --label '{self.label}' --scopes '{self.scopes.text()}'`"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _token(row: dict[str, Any]) -> Token:
    return Token(
        row["id"],
        row["label"],
        row["kind"],
        Scopes.parse(row["scopes"]),
        row["session_id"],
        row["created_at"],
        row["expires_at"],
        row["revoked_at"],
        row["last_used_at"],
        json.loads(row["config"]) if row["config"] else None,
        row.get("writes") or "active",
    )


def check_vaults(conn: apsw.Connection, scopes: Scopes) -> None:
    """``invalid-input`` for a ``vault:`` scope naming no registered vault (a token made for it would see nothing
    or, once a vault of that name is added, a vault the person never chose)."""

    known = [v.name for v in list_vaults(conn)]
    unknown = [v for v in scopes.vaults if v not in known]
    if unknown:
        raise KmsError(
            "invalid-input",
            f"no vault named {', '.join(map(repr, unknown))} (scope vault:); vaults: {', '.join(known) or 'none'}",
            vaults=known,
        )


def check_reach(scopes: Scopes, allowlist: Allowlist) -> None:
    """``invalid-input`` for a writing token whose ``folder:`` scope meets no ``write.allowlist`` entry: it
    could never write, while every list showed it as able to (``folder:drafts/sub`` under ``drafts/*``)."""
    if scopes.tier == "read":
        return
    never = [f for f in scopes.folders if not allowlist.reaches(f)]
    if never:
        allowed = "; ".join(describe(p) for p in allowlist.patterns)
        raise KmsError(
            "invalid-input",
            f"folder:{never[0]} could never write: write.allowlist allows only {allowed}. "
            "Choose folders inside it, or widen write.allowlist first",
        )


def create(
    conn: apsw.Connection,
    *,
    label: str,
    scopes: Scopes,
    kind: str = "host",
    expires_in_s: float | None = None,
    session_id: str | None = None,
    config: dict[str, str] | None = None,
    now: float | None = None,
) -> tuple[Token, str]:
    """A new token and its one printable form (shown once, never stored). ``config``: the contract of the
    launcher session it is made for (its settings as launched, which the token's scopes then narrow)."""
    if kind not in KINDS:
        raise KmsError("invalid-input", f"token kind must be one of {', '.join(KINDS)}")
    label = label.strip()
    if not label or len(label) > 200 or any(c in label for c in "\n\r\x00"):
        raise KmsError("invalid-input", "a token's label is one line of 1 to 200 characters")
    if scopes.admin and kind != "admin":
        raise KmsError("invalid-input", "the admin scope is only for the person's own admin tokens, never an agent's")
    if expires_in_s is not None and expires_in_s <= 0:
        raise KmsError("invalid-input", "a token's lifetime must be positive")
    now = time.time() if now is None else now
    if kind != "session" and any(t.label == label for t in list_tokens(conn, now=now)):
        raise KmsError(
            "already-exists",
            f"a live token is labelled {label!r} already: choose another label (or `kms token revoke {label}`)",
        )
    token_id = "t" + secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    with write_tx(conn):
        conn.execute(
            "INSERT INTO tokens (id, label, kind, scopes, hash, session_id, config, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                token_id,
                label,
                kind,
                scopes.text(),
                _digest(secret),
                session_id or new_session_id(),
                json.dumps(config) if config else None,
                now,
                now + expires_in_s if expires_in_s is not None else None,
            ),
        )
    return get(conn, token_id), f"{PREFIX}{token_id}_{secret}"


SESSION_LEASE_S = 90.0
"""How long a ``kms claude`` session token lives past its launcher's last renewal: the token is a lease the
launcher renews (every third of it, ``renew_lease``), so a launcher killed outright (SIGKILL, a crash) leaves a
token that ends by itself within this long, and its session is then ended (``end_lapsed_sessions``). The
service cannot watch the launcher's pid (another pid namespace, a reused pid), so the launcher proves it lives.
The one place this length is set (``KMS_TOKEN_LEASE_S`` overrides it for tests and ops)."""
LEASE_ENV = "KMS_TOKEN_LEASE_S"  # for tests and ops only: another lease length, in seconds (the launcher reads it)


def session_lease_s(env: Mapping[str, str]) -> float:
    """The lease of a session token: ``SESSION_LEASE_S``, or ``$KMS_TOKEN_LEASE_S`` (tests, ops) when it is a
    positive number of seconds."""
    return positive_seconds(env.get(LEASE_ENV) or "") or SESSION_LEASE_S


def for_session(
    conn: apsw.Connection, config: SessionConfig, *, lease_s: float = SESSION_LEASE_S, now: float | None = None
) -> tuple[Token, str]:
    """The token of one launcher session served by the service: it stands for ``config.session_id``, carries
    the session's own contract, and its scopes are the session's ceiling (tiers, vault, approval). It is a
    lease of ``lease_s`` its launcher keeps renewing (``renew_lease``)."""

    enabled = [t for t in TIERS if tier_enabled(config, t)]
    scopes = Scopes(
        tier=enabled[-1] if enabled else "read", vaults=config.vault_names, approval=config.approval == "always"
    )
    return create(
        conn,
        label=f"kms claude {config.session_id}",
        scopes=scopes,
        kind="session",
        expires_in_s=lease_s,
        session_id=config.session_id,
        config=config.to_env(),
        now=now,
    )


HOST_TOKEN_VARS = {
    "cursor": "KMS_TOKEN_CURSOR",
    "vscode": "KMS_TOKEN_VSCODE",
    "windsurf": "KMS_TOKEN_WINDSURF",
    "codex": "KMS_TOKEN_CODEX",
    "gemini": "KMS_TOKEN_GEMINI",
}  # hosts that read it from the env


def _secrets_dir(db_path: Path) -> Path:
    folder = service_folder(db_path) / "hosts"
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def for_host(conn: apsw.Connection, db_path: Path, host: str, scopes: Scopes, *, now: float | None = None) -> Token:
    """A fresh token for an agent host (``host:<name>``; the host's previous one revoked), its secret kept
    in kms's private folder (0600) for the host's helper or the person's shell, never in the host's file."""
    check_vaults(conn, scopes)
    label = f"host:{host}"
    for old in list_tokens(conn, now=now):
        if old.label == label:
            revoke(conn, old.id, now=now)
    token, secret = create(conn, label=label, scopes=scopes, kind="host", now=now)
    path = _secrets_dir(db_path) / f"{host}.token"
    fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret)
    os.replace(path.with_suffix(".tmp"), path)
    return token


def host_secret(conn: apsw.Connection, db_path: Path, host: str, *, now: float | None = None) -> str:
    """The secret of ``host``'s token (``kms token secret``, ``kms token header``), only while the token is
    active: a revoked or expired one would just earn the host a 401 with no hint why, so it is refused here,
    naming the fix."""
    try:
        secret = (_secrets_dir(db_path) / f"{host}.token").read_text().strip()
    except FileNotFoundError:
        raise KmsError("not-found", f"no token is kept for {host}: run `kms mcp-config {host} --http`") from None
    token_id, _, raw = secret.removeprefix(PREFIX).partition("_")
    found = rows(conn, "SELECT * FROM tokens WHERE id = ?", (token_id,))
    renew = f"run `kms mcp-config {host} --http` for a new one"
    if not found or not hmac.compare_digest(found[0]["hash"], _digest(raw)):
        raise KmsError("not-found", f"the token kept for {host} is unknown to this database: {renew}")
    token = _token(found[0])
    state = token.state(time.time() if now is None else now)
    if state != "active":
        raise KmsError("revoked", f"the token of {host} ({token.id}) is {state}: {renew}", token=token.id)
    return secret


def forget_host(conn: apsw.Connection, db_path: Path, host: str, *, now: float | None = None) -> int:
    """Revoke ``host``'s tokens and delete its kept secret; how many tokens were revoked."""
    revoked = 0
    for old in list_tokens(conn, now=now):
        if old.label == f"host:{host}":
            revoke(conn, old.id, now=now)
            revoked += 1
    (_secrets_dir(db_path) / f"{host}.token").unlink(missing_ok=True)
    return revoked


def get(conn: apsw.Connection, token_id: str) -> Token:
    found = rows(conn, "SELECT * FROM tokens WHERE id = ?", (token_id,))
    if not found:
        raise KmsError("not-found", f"no token {token_id!r}")
    return _token(found[0])


def list_tokens(conn: apsw.Connection, *, include_ended: bool = False, now: float | None = None) -> list[Token]:
    now = time.time() if now is None else now
    out = [_token(r) for r in rows(conn, f"{_WITH_WRITES} ORDER BY t.created_at DESC")]
    return out if include_ended else [t for t in out if t.state(now) == "active"]


_WITH_WRITES = "SELECT t.*, s.control AS writes FROM tokens t LEFT JOIN sessions s ON s.id = t.session_id"


def standing_for(conn: apsw.Connection, session_id: str, *, now: float | None = None) -> Token | None:
    """The active ``host`` token that stands for ``session_id`` (its one session, for good), if any."""
    now = time.time() if now is None else now
    found = rows(conn, f"{_WITH_WRITES} WHERE t.session_id = ? AND t.kind = 'host'", (session_id,))
    active = [t for t in map(_token, found) if t.state(now) == "active"]
    return active[0] if active else None


def revoke(conn: apsw.Connection, token_id: str, *, now: float | None = None) -> Token:
    """Revoke a token (by id, or by its label when one active token has it); idempotent."""
    now = time.time() if now is None else now
    with write_tx(conn):
        found = rows(conn, "SELECT id FROM tokens WHERE id = ?", (token_id,)) or rows(
            conn, "SELECT id FROM tokens WHERE label = ? AND revoked_at IS NULL", (token_id,)
        )
        if not found:
            raise KmsError("not-found", f"no token {token_id!r} (kms token list shows them)")
        if len(found) > 1:
            raise KmsError("invalid-input", f"several tokens are labelled {token_id!r}: revoke one by its id")
        conn.execute("UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", (now, found[0]["id"]))
    return get(conn, found[0]["id"])


def renew_lease(conn: apsw.Connection, token_id: str, lease_s: float, *, now: float | None = None) -> bool:
    """Push a session token's expiry ``lease_s`` ahead: its launcher still runs. False for a revoked token (for
    good) or one that is not a lease.

    A lease that lapsed while its launcher lived (the machine slept, the job was stopped with Ctrl-Z, both
    launcher and claude frozen) comes back: only the launcher, alive again, renews, and the person's own
    process holding the database needs no token's leave. Meanwhile the token was refused; the session the
    sweep ended at the lapse (``end_lapsed_sessions``: ended exactly then, no exit code) is open again. A dead
    launcher renews nothing, so its token stays lapsed."""
    now = time.time() if now is None else now
    with write_tx(conn):
        found = rows(
            conn,
            "SELECT session_id, expires_at FROM tokens WHERE id = ? AND kind = 'session' AND revoked_at IS NULL "
            "AND expires_at IS NOT NULL",
            (token_id,),
        )
        if not found:
            return False
        conn.execute("UPDATE tokens SET expires_at = ? WHERE id = ?", (now + lease_s, token_id))
        lapsed_at = found[0]["expires_at"]
        if lapsed_at <= now:
            conn.execute(
                "UPDATE sessions SET ended_at = NULL WHERE id = ? AND ended_at = ? AND exit_code IS NULL",
                (found[0]["session_id"], lapsed_at),
            )
    return True


def end_lapsed_sessions(conn: apsw.Connection, *, now: float | None = None) -> list[str]:
    """End the sessions whose launcher stopped renewing their token (its lease lapsed, none of their session
    tokens still active): ended at the lapse, with no exit code (nobody saw the agent's). The service runs
    this with its sweep, so such a session is shown ended (``kms session list``, the dashboard) instead of
    live for as long as the service beats for it. A launcher that ends normally revokes its token and ends
    its session itself, with the exit code."""
    now = time.time() if now is None else now
    lapsed = """SELECT t.session_id, max(t.expires_at) AS lapsed_at FROM tokens t
        JOIN sessions s ON s.id = t.session_id AND s.ended_at IS NULL
        WHERE t.kind = 'session' AND t.revoked_at IS NULL AND t.expires_at <= ?
        AND NOT EXISTS (SELECT 1 FROM tokens a WHERE a.session_id = t.session_id AND a.revoked_at IS NULL
                        AND (a.expires_at IS NULL OR a.expires_at > ?))
        GROUP BY t.session_id"""
    found = rows(conn, lapsed, (now, now))  # read first: the service sweeps every 2 s, and seldom finds one
    if not found:
        return []
    with write_tx(conn):
        for row in found:
            conn.execute(
                "UPDATE sessions SET ended_at = ?, last_seen_at = max(last_seen_at, ?) WHERE id = ? "
                "AND ended_at IS NULL",
                (row["lapsed_at"], row["lapsed_at"], row["session_id"]),
            )
    return [row["session_id"] for row in found]


def revoke_session_tokens(conn: apsw.Connection, session_ids: list[str], *, now: float | None = None) -> int:
    """Revoke the ``session`` tokens (``kms claude``'s, ``for_session``) of these sessions, when the service that
    served them stops: the session ended with it, and its token would otherwise stay usable until its lease
    lapses (``SESSION_LEASE_S``). ``host`` tokens stand for their session for good and stay. Returns how many."""
    if not session_ids:
        return 0
    now = time.time() if now is None else now
    marks = ",".join("?" * len(session_ids))
    with write_tx(conn):
        conn.execute(
            f"UPDATE tokens SET revoked_at = ? WHERE kind = 'session' AND revoked_at IS NULL "  # noqa: S608 - marks only
            f"AND session_id IN ({marks})",
            (now, *session_ids),
        )
        return conn.changes()


def verify(conn: apsw.Connection, presented: str, *, now: float | None = None, touch: bool = True) -> Token | None:
    """The active token ``presented`` is, else None (unknown, wrong secret, revoked, expired: all alike).
    ``touch``: record its use (``last_used_at``, at most every ``LAST_USED_EVERY_S``) here; the service does
    that off its event loop instead (``touch_due``, ``touch``), since it is a write."""
    if not isinstance(presented, str) or not presented.startswith(PREFIX) or len(presented) > 200:
        return None
    token_id, sep, secret = presented[len(PREFIX) :].partition("_")
    if not sep or not secret:
        return None
    found = rows(conn, "SELECT * FROM tokens WHERE id = ?", (token_id,))
    if not found or not hmac.compare_digest(found[0]["hash"], _digest(secret)):
        return None
    token = _token(found[0])
    now = time.time() if now is None else now
    if token.state(now) != "active":
        return None
    if touch and touch_due(token, now):
        mark_used(conn, token.id, now)
    return token


def refusal(conn: apsw.Connection, presented: str, *, now: float | None = None) -> str:
    """Why ``presented`` is refused, for the 401 its host shows: a revoked or expired token said only "Server
    returned an error response" to the agent. The state is told only to a client that holds the token's
    secret; any other presented text is an unknown token, whichever part of it is wrong."""
    token_id, sep, secret = presented[len(PREFIX) :].partition("_") if presented.startswith(PREFIX) else ("", "", "")
    found = rows(conn, "SELECT * FROM tokens WHERE id = ?", (token_id,)) if sep and secret else []
    if not found or not hmac.compare_digest(found[0]["hash"], _digest(secret)):
        return "unknown kms token: a live one is needed (kms token create; kms mcp-config HOST --http)"
    token = _token(found[0])
    state = token.state(time.time() if now is None else now)
    if state == "revoked":
        return f"this kms token ({token.label}) was revoked: the host needs a new one (kms mcp-config HOST --http)"
    if state == "expired" and token.kind == "session":
        return "this session's kms token lapsed: the `kms claude` that renewed it has ended"
    if state == "expired":
        return f"this kms token ({token.label}) expired: the host needs a new one (kms token create)"
    return "an admin token is for the person's own tools, not for agent hosts"


def touch_due(token: Token, now: float) -> bool:
    return token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY_S


def mark_used(conn: apsw.Connection, token_id: str, now: float | None = None) -> None:
    """Record a token's use now (what ``kms token list`` and the dashboard show as last used)."""
    with write_tx(conn):
        conn.execute("UPDATE tokens SET last_used_at = ? WHERE id = ?", (time.time() if now is None else now, token_id))
