"""Who may open the review pages (``server.web``): one-time links, browser sessions and paired devices (m050).

The pages take no bearer token (a token is an agent's; a page that took one would let an agent approve its own
writes). A person gets in by a **one-time link** instead:

- ``kms review`` makes a ``login`` link (``LOGIN_LINK_S``, single use). Opening it exchanges it, once, for a
  **browser session**: a random cookie secret (``SESSION_S``), HttpOnly and SameSite=Strict (``server.web``
  sets the cookie; this module keeps the rules).
- ``kms review pair`` makes a ``pair`` link (``PAIR_LINK_S``, single use) naming a device; the phone that opens
  it gets a **device** cookie for ``DEVICE_S`` (30 days), listed (``devices``) and revocable (``revoke``).
  The public origin (remote mode) serves devices only: ``session_for(..., devices_only=True)``.

Only digests (SHA-256) of link and cookie secrets are stored: a copy of the database opens nothing. A link is
used by one conditional UPDATE (``used_at IS NULL AND expires_at > now``), so two tabs opening it at once get
one session between them. Each POST of a page carries a CSRF token derived from the cookie's secret
(``csrf_token``): a page on another site knows neither.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

import apsw

from server.errors import KmsError
from server.store.db import rows, write_tx

# Where the pages live under a listener's origin (``server.web`` mounts them there): one home for the path, so
# the CLI, the service and a staged call's answer (``approvals.review_hint``) build the same addresses.
PAGES_PATH = "/review"


def pages_url(origin: str) -> str:
    """The pages' address (the queue) under ``origin`` (``http://127.0.0.1:8765``, ``https://notes.example``)."""
    return origin.rstrip("/") + PAGES_PATH


def item_url(pages: str, pending_id: int) -> str:
    """The page of one staged call (``server.web.routes``: ``/pending/{pending_id}``) under the pages' address."""
    return f"{pages}/pending/{pending_id}"


LOGIN_LINK_S = 120.0  # a `kms review` link: opened at once by the browser it launches
PAIR_LINK_S = 600.0  # a pairing link: time to find the phone and scan the code
SESSION_S = 12 * 3600.0  # a browser session on this machine
DEVICE_S = 30 * 86400.0  # a paired device
TOUCH_S = 60.0  # last_used_at is written at most this often per session (a page polls every second)
NAME_MAX = 60
PURPOSES = ("login", "pair")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class ReviewSession:
    """A browser session or a paired device, as stored (never its secret)."""

    id: str
    kind: str  # browser | device
    name: str | None
    created_at: float
    expires_at: float
    last_used_at: float | None
    revoked_at: float | None

    def state(self, now: float) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if now >= self.expires_at else "active"

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
            "lastUsedAt": self.last_used_at,
            "revokedAt": self.revoked_at,
            "state": self.state(now),
        }


def _session(r: dict[str, Any]) -> ReviewSession:
    return ReviewSession(
        r["id"], r["kind"], r["name"], r["created_at"], r["expires_at"], r["last_used_at"], r["revoked_at"]
    )


def clean_name(name: str | None) -> str | None:
    """A device's name as the person gave it: printable, trimmed, at most ``NAME_MAX`` characters."""
    text = "".join(ch for ch in (name or "") if ch.isprintable()).strip()[:NAME_MAX]
    return text or None


def create_link(conn: apsw.Connection, purpose: str, *, name: str | None = None, now: float | None = None) -> str:
    """A new one-time link secret (``purpose``: ``login`` or ``pair``; ``name``: the device a pairing names).
    Links long past their time are dropped here (nothing else writes this table)."""
    if purpose not in PURPOSES:
        raise KmsError("invalid-input", f"a review link is one of {PURPOSES}, not {purpose!r}")
    at = time.time() if now is None else now
    secret = secrets.token_urlsafe(32)
    life = LOGIN_LINK_S if purpose == "login" else PAIR_LINK_S
    with write_tx(conn):
        conn.execute("DELETE FROM review_links WHERE expires_at < ?", (at - 86400.0,))
        conn.execute(
            "INSERT INTO review_links (digest, purpose, name, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            (digest(secret), purpose, clean_name(name), at, at + life),
        )
    return secret


def redeem(
    conn: apsw.Connection, link_secret: str, *, purposes: tuple[str, ...] = PURPOSES, now: float | None = None
) -> tuple[str, ReviewSession] | None:
    """Exchange a one-time link for a session: (the cookie's secret, the session), or None for a link that is
    unknown, used, expired or not of ``purposes`` (the public origin takes ``pair`` links only). Once only."""
    at = time.time() if now is None else now
    key = digest(link_secret or "")
    marks = ",".join("?" * len(purposes))
    with write_tx(conn):
        found = rows(
            conn,
            f"SELECT purpose, name FROM review_links WHERE digest = ? AND used_at IS NULL AND expires_at > ?"
            f" AND purpose IN ({marks})",
            (key, at, *purposes),
        )
        if not found:
            return None
        conn.execute("UPDATE review_links SET used_at = ? WHERE digest = ? AND used_at IS NULL", (at, key))
        if conn.changes() != 1:
            return None
        device = found[0]["purpose"] == "pair"
        secret = secrets.token_urlsafe(32)
        sid = "r" + secrets.token_hex(6)
        session = ReviewSession(
            sid,
            "device" if device else "browser",
            found[0]["name"] if device else None,
            at,
            at + (DEVICE_S if device else SESSION_S),
            at,
            None,
        )
        conn.execute(
            "INSERT INTO review_sessions (id, digest, kind, name, created_at, expires_at, last_used_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sid, digest(secret), session.kind, session.name, at, session.expires_at, at),
        )
    return secret, session


def session_for(
    conn: apsw.Connection, cookie_secret: str | None, *, devices_only: bool = False, now: float | None = None
) -> ReviewSession | None:
    """The active session a cookie stands for (None: none, revoked, expired, or not a device where only devices
    are served). One indexed read; its last use is written at most every ``TOUCH_S``."""
    if not cookie_secret:
        return None
    at = time.time() if now is None else now
    found = rows(conn, "SELECT * FROM review_sessions WHERE digest = ?", (digest(cookie_secret),))
    if not found:
        return None
    session = _session(found[0])
    if session.state(at) != "active" or (devices_only and session.kind != "device"):
        return None
    if session.last_used_at is None or at - session.last_used_at >= TOUCH_S:
        with write_tx(conn):
            conn.execute("UPDATE review_sessions SET last_used_at = ? WHERE id = ?", (at, session.id))
    return session


def csrf_token(cookie_secret: str) -> str:
    """The CSRF token of a session's forms: a keyed digest of its cookie's secret (nothing stored)."""
    return hmac.new(cookie_secret.encode(), b"kms-review-csrf", hashlib.sha256).hexdigest()


def csrf_ok(cookie_secret: str, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(csrf_token(cookie_secret), str(presented))


def devices(conn: apsw.Connection, *, include_ended: bool = False, now: float | None = None) -> list[ReviewSession]:
    """Paired devices, newest first (``include_ended``: revoked and expired ones too)."""
    at = time.time() if now is None else now
    found = [
        _session(r) for r in rows(conn, "SELECT * FROM review_sessions WHERE kind = 'device' ORDER BY created_at DESC")
    ]
    return found if include_ended else [d for d in found if d.state(at) == "active"]


def revoke(conn: apsw.Connection, session_id: str, *, now: float | None = None) -> ReviewSession:
    """End a browser session or a paired device at once (its next request is refused); ``not-found`` else."""
    at = time.time() if now is None else now
    with write_tx(conn):
        conn.execute(
            "UPDATE review_sessions SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", (at, session_id.strip())
        )
        found = rows(conn, "SELECT * FROM review_sessions WHERE id = ?", (session_id.strip(),))
    if not found:
        raise KmsError("not-found", f"no review session or device {session_id!r}; `kms review devices` lists them")
    return _session(found[0])
