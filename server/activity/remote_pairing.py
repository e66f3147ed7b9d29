"""Pairing codes: the proof, on the consent page, that whoever consents holds the machine kms runs on.

``kms remote pair`` (or the dashboard) makes a code of ``DIGITS`` digits, valid ``CODE_S`` and for one
consent; making one ends the one before. Only its SHA-256 is kept. ``MAX_FAILURES`` wrong codes in a row lock
pairing for ``LOCK_S`` (every code is refused meanwhile, the right one too): a guesser gets a handful of
tries per quarter hour against a hundred million codes, each living ten minutes.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

import apsw

from server.errors import KmsError
from server.store.db import rows, write_tx

DIGITS = 8
CODE_S = 600.0
MAX_FAILURES = 5
LOCK_S = 900.0


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def _plain(code: str) -> str:
    return "".join(c for c in code if c.isdigit())


def new_code(conn: apsw.Connection, *, now: float | None = None) -> tuple[str, float]:
    """A fresh pairing code, printable as ``1234-5678``, and when it expires; earlier unused codes end."""
    now = time.time() if now is None else now
    digits = "".join(secrets.choice("0123456789") for _ in range(DIGITS))
    with write_tx(conn):
        conn.execute("DELETE FROM remote_pairing WHERE used_at IS NULL OR expires_at < ?", (now,))
        conn.execute(
            "INSERT INTO remote_pairing (hash, created_at, expires_at) VALUES (?, ?, ?)",
            (_digest(digits), now, now + CODE_S),
        )
    return f"{digits[:4]}-{digits[4:]}", now + CODE_S


def locked_until(conn: apsw.Connection, *, now: float | None = None) -> float | None:
    now = time.time() if now is None else now
    found = rows(conn, "SELECT locked_until FROM remote_pairing_lock WHERE id = 1")
    until = found[0]["locked_until"] if found else None
    return until if until is not None and until > now else None


def use_code(conn: apsw.Connection, presented: str, *, now: float | None = None) -> None:
    """Spend the pairing code ``presented`` (dashes and spaces ignored). ``rate-limited`` while pairing is
    locked; ``invalid-input`` for a wrong, used or expired code (counted: the fifth in a row locks)."""
    now = time.time() if now is None else now
    with write_tx(conn):
        until = locked_until(conn, now=now)
        if until is not None:
            raise KmsError(
                "rate-limited",
                f"pairing is locked after {MAX_FAILURES} wrong codes; try again in {int(until - now) // 60 + 1} min",
                retryAfterMs=int((until - now) * 1000),
            )
        live = rows(conn, "SELECT hash FROM remote_pairing WHERE used_at IS NULL AND expires_at > ?", (now,))
        wanted = _digest(_plain(presented))
        match = next((r["hash"] for r in live if hmac.compare_digest(r["hash"], wanted)), None)
        if match is not None:
            conn.execute("UPDATE remote_pairing SET used_at = ? WHERE hash = ?", (now, match))
            conn.execute("DELETE FROM remote_pairing_lock")
            return
        found = rows(conn, "SELECT failures FROM remote_pairing_lock WHERE id = 1")
        failures = (found[0]["failures"] if found else 0) + 1
        lock = now + LOCK_S if failures >= MAX_FAILURES else None
        conn.execute(
            "INSERT OR REPLACE INTO remote_pairing_lock (id, failures, locked_until) VALUES (1, ?, ?)",
            (0 if lock else failures, lock),
        )
    left = MAX_FAILURES - failures
    if left <= 0:
        raise KmsError("rate-limited", f"wrong pairing code; pairing is now locked for {int(LOCK_S // 60)} min")
    raise KmsError("invalid-input", f"wrong or expired pairing code (`kms remote pair` makes one); {left} tries left")
