"""What kms's git work last did for each vault in git mode (m055): the one place ``kms status``, ``kms doctor``
and the dashboard read a git failure from, so a refused push or a commit that failed is a state the person
sees until it is fixed, never only a line in a log.

Written by ``server.writes.git_units`` (a commit per unit) and ``server.index.git_sync`` (fetch, merge, push).
"""

from __future__ import annotations

import time
from typing import Any

import apsw

from server.store.db import rows, write_tx

FIELDS = ("committed_at", "commit_error", "fetched_at", "fetch_error", "merged_at", "merge_error", "pushed_at")


def note(conn: apsw.Connection, vault_id: int, **values: Any) -> None:
    """Set some of the vault's git state (columns of ``git_state``), making its row if it has none."""
    if not values:
        return
    cols = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    updates = ", ".join(f"{k} = excluded.{k}" for k in values)
    with write_tx(conn):
        conn.execute(
            f"INSERT INTO git_state(vault_id, {cols}) VALUES (?, {marks}) "
            f"ON CONFLICT(vault_id) DO UPDATE SET {updates}",
            (vault_id, *values.values()),
        )


def push_failed(conn: apsw.Connection, vault_id: int, message: str, unpushed: int) -> None:
    """A push was refused or could not reach the remote: kept until a push succeeds."""
    note(conn, vault_id, push_error=message[-1000:], push_error_at=time.time(), unpushed=unpushed)


def pushed(conn: apsw.Connection, vault_id: int) -> None:
    note(conn, vault_id, pushed_at=time.time(), push_error=None, push_error_at=None, unpushed=0)


def state(conn: apsw.Connection, vault_id: int) -> dict[str, Any] | None:
    found = rows(conn, "SELECT * FROM git_state WHERE vault_id = ?", (vault_id,))
    return found[0] if found else None


def problems(conn: apsw.Connection) -> list[dict[str, Any]]:
    """Every vault in git mode whose last commit, fetch, merge or push failed: ``{vault, what, message, at}``
    (what ``kms status`` and ``kms doctor`` show as unhealthy)."""
    out: list[dict[str, Any]] = []
    for r in rows(
        conn,
        """SELECT v.name, g.* FROM git_state g JOIN vaults v ON v.id = g.vault_id
           WHERE v.git_mode IN ('commit', 'sync') ORDER BY v.name""",
    ):
        for what in ("commit", "fetch", "merge", "push"):
            if r.get(f"{what}_error"):
                out.append(
                    {
                        "vault": r["name"],
                        "what": what,
                        "message": r[f"{what}_error"],
                        "at": r.get("push_error_at") if what == "push" else None,
                        "unpushed": r.get("unpushed") or 0,
                    }
                )
    return out


def summary(conn: apsw.Connection) -> list[dict[str, Any]]:
    """Each vault in git mode: its mode, when kms last committed, fetched and pushed, the commits that wait
    for a push, and its problems (``problems``): what ``kms status`` and ``kms doctor`` show."""
    found = rows(
        conn,
        """SELECT v.id, v.name, v.git_mode, g.committed_at, g.fetched_at, g.pushed_at, g.unpushed
           FROM vaults v LEFT JOIN git_state g ON g.vault_id = v.id
           WHERE v.git_mode IN ('commit', 'sync') ORDER BY v.name""",
    )
    bad: dict[str, list[dict[str, Any]]] = {}
    for p in problems(conn):
        bad.setdefault(p["vault"], []).append(p)
    return [
        {
            "vault": r["name"],
            "mode": r["git_mode"],
            "committedAt": r["committed_at"],
            "fetchedAt": r["fetched_at"],
            "pushedAt": r["pushed_at"],
            "unpushed": r["unpushed"] or 0,
            "problems": bad.get(r["name"], []),
        }
        for r in found
    ]
