"""Named, recorded schema migrations (in the spirit of sqlite-utils ``Migrations``).

Each migration is a function ``mNNN_name(conn)`` appended to ``MIGRATIONS``.
Never edit one that has shipped: add a new one. Applied names are recorded in
``_migrations`` so every process upgrades an older database on open.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import apsw

from server.store.migrations_first import (  # the first schema, applied by every database since
    m001_initial,
    m002_agent_activity,
    m003_embeddings,
    m004_hidden_index,
    m005_reverts_index,
    m006_fts_tuning,
    m007_change_kind,
    m008_privacy_rules,
    m009_file_changes,
    m010_overwritten,
    m011_dialects,
    m012_orientation,
    m013_control,
)

Migration = Callable[[apsw.Connection], None]


def m018_folder_listing(conn: apsw.Connection) -> None:
    """A folder's visible notes in the order a folder listing pages them (newest first, then path, then id):
    without it an unscoped ``kms_list_folder`` read and sorted every note of the folder (1,000 rows, ~1 ms)
    for each 50-card page; with it a page is its 51 index entries. (``notes_visible_folder`` serves the
    vault-scoped listing and the counts by folder.)"""
    conn.execute("CREATE INDEX notes_folder_recent ON notes(folder, updated_at DESC, path, id) WHERE hidden_at IS NULL")


def m019_applied_units(conn: apsw.Connection) -> None:
    """The units of several files rewritten in place whose change is recorded (``server.writes.unit_journal``):
    a journal left by a writer that died after its commit is then deleted, not rolled back. A row lives only
    while its journal file does."""
    conn.execute("CREATE TABLE applied_units (token TEXT PRIMARY KEY, applied_at REAL NOT NULL) WITHOUT ROWID")


def m020_logseq_block_refs(conn: apsw.Connection) -> None:
    """Logseq block references (``((uuid))``) are links now, and a page answers to the ids of its blocks
    (note_keys kind 6): a Logseq vault's notes are read again at the next ``kms index`` or watcher scan
    (their mtime and hash forgotten), since their rows say nothing of either yet."""
    conn.execute(
        "UPDATE notes SET content_hash = '', mtime_ns = 0 "
        "WHERE vault_id IN (SELECT id FROM vaults WHERE dialect = 'logseq')"
    )


def m021_tokens(conn: apsw.Connection) -> None:
    """Bearer tokens of the kms service (``server.activity.tokens``): the SHA-256 of each secret, never the
    secret; the session each token stands for; its scopes; a launcher session's own contract (``config``: the
    ``SessionConfig.to_env`` it was launched with); when it ends (expiry, revocation)."""
    conn.execute(
        "CREATE TABLE tokens (id TEXT PRIMARY KEY, label TEXT NOT NULL, kind TEXT NOT NULL, scopes TEXT NOT NULL, "
        "hash TEXT NOT NULL, session_id TEXT NOT NULL, config TEXT, created_at REAL NOT NULL, expires_at REAL, "
        "revoked_at REAL, last_used_at REAL) WITHOUT ROWID"
    )


def m022_provenance_lookups(conn: apsw.Connection) -> None:
    """Who last changed a note (``server.activity.authorship``): the file changes of a unit are looked up by
    the hash a note holds now, so a ``kms_read`` finds the rename or move that wrote it without a scan."""
    conn.execute("CREATE INDEX tool_file_changes_hash ON tool_file_changes(hash_after)")


def m023_idempotency_keys(conn: apsw.Connection) -> None:
    """A write call's optional idempotency key and the answer it gave (``server.activity.idempotency``): a
    retry with the same key in the same session is answered from its first call's row and writes nothing."""
    conn.execute("ALTER TABLE tool_invocations ADD COLUMN idempotency_key TEXT")
    conn.execute("ALTER TABLE tool_invocations ADD COLUMN answer TEXT")  # JSON: the arguments' digest, the result
    conn.execute(
        "CREATE INDEX tool_invocations_idempotency ON tool_invocations(session_id, idempotency_key) "
        "WHERE idempotency_key IS NOT NULL"
    )


def m029_staged_why(conn: apsw.Connection) -> None:
    """Why a write was staged for the person when ``write.approval`` did not ask for it: its text looks like
    instructions planted for an agent (``server.vault.planted``). A JSON list of reasons; NULL otherwise."""
    conn.execute("ALTER TABLE pending_writes ADD COLUMN why TEXT")


MIGRATIONS: list[Migration] = [
    m001_initial,
    m002_agent_activity,
    m003_embeddings,
    m004_hidden_index,
    m005_reverts_index,
    m006_fts_tuning,
    m007_change_kind,
    m008_privacy_rules,
    m009_file_changes,
    m010_overwritten,
    m011_dialects,
    m012_orientation,
    m013_control,
    m018_folder_listing,
    m019_applied_units,
    m020_logseq_block_refs,
    m021_tokens,
    m022_provenance_lookups,
    m023_idempotency_keys,
    m029_staged_why,
]


def applied(conn: apsw.Connection) -> list[str]:
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    return [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY name")]


def migrate(conn: apsw.Connection, upto: str | None = None) -> list[str]:
    """Apply every pending migration (or up to and including ``upto``); return the names applied."""
    done = set(applied(conn))
    if all(m.__name__ in done for m in MIGRATIONS):
        return []
    ran: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = {r[0] for r in conn.execute("SELECT name FROM _migrations")}  # re-read under the lock
        for m in MIGRATIONS:
            if m.__name__ not in done:
                m(conn)
                conn.execute("INSERT INTO _migrations VALUES (?, ?)", (m.__name__, time.time()))
                ran.append(m.__name__)
            if upto and m.__name__ == upto:
                break
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return ran
