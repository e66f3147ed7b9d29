"""An index refresh an agent may ask for (``kms_reindex``): rate-limited, reporting what changed.

The watcher keeps the index live while ``kms mcp`` runs, but an agent that saw a stale answer (a
note it knows was just saved elsewhere, a server without a watcher) can ask for the vault to be
looked at again. Each vault can be refreshed by an agent at most once per ``INTERVAL_S`` (kept in
``meta``, so every server of the database shares it): a refresh reads every file's stat, and an
agent looping on it would keep the database's write lock. The answer counts what changed; it names
no note, so a hidden one never shows.
"""

from __future__ import annotations

import time
from typing import Any

import apsw

from server.errors import KmsError
from server.index.indexer import index_vault
from server.vault.registry import Vault, list_vaults
from server.vault.scope import Vaults, VaultScope

INTERVAL_S = 60.0


def _key(vault: Vault) -> str:
    return f"agent_reindex_at:{vault.name}"


def refresh(conn: apsw.Connection, vault_id: Vaults, *, now: float | None = None) -> dict[str, Any]:
    """Index the vault ``vault_id`` (None: every vault) again; ``rate-limited`` when an agent did within
    ``INTERVAL_S``."""

    now = time.time() if now is None else now
    vaults = [v for v in list_vaults(conn) if VaultScope.of(vault_id).sees(v.id)]
    if not vaults:
        raise KmsError("no-index", "no vault is registered; the person adds one with `kms vault add`")
    last = {
        r[0]: float(r[1])
        for r in conn.execute(
            f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(vaults))})", [_key(v) for v in vaults]
        )
    }
    wait = max((last[_key(v)] + INTERVAL_S - now for v in vaults if _key(v) in last), default=0.0)
    if wait > 0:
        raise KmsError(
            "rate-limited",
            f"the index was refreshed for an agent less than {INTERVAL_S:g} s ago; "
            f"try again in {wait:.0f} s (the watcher keeps it live meanwhile)",
            retryAfterMs=int(wait * 1000) + 1,
        )
    for v in vaults:  # taken before the work: two agents asking at once get one refresh
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_key(v), str(now)))
    out: list[dict[str, Any]] = []
    changed = 0
    for v in vaults:
        r = index_vault(conn, v)
        changed += r.changed
        out.append(
            {
                "vault": v.name,
                "scanned": r.scanned,
                "added": r.added,
                "updated": r.updated,
                "removed": r.deleted,
                "renamed": r.renamed,
                "unchanged": r.unchanged,
                "errors": len(r.errors),
                "seconds": round(r.seconds, 3),
            }
        )
    return {"vaults": out, "changed": changed, "nextAllowedIn": INTERVAL_S}
