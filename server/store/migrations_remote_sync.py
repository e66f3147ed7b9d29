"""The migrations of the remote, review and sync round (m044-m056): detached staging and landed writes for
review, OAuth clients/grants/tokens and remote pairing, review access, conflicts, vault sync and git state.
They are their own module because they were shipped together for one feature set and, like every shipped
migration, are never edited; ``migrations.MIGRATIONS`` orders them with the earlier ones."""

from __future__ import annotations

import apsw


def m044_detached_staging(conn: apsw.Connection) -> None:
    """A staged call nobody waits on (``SessionConfig.review_detached``: a remote grant's) is applied by the
    person's decision in whichever process decides it (``server.writes.review.decide_pending``): its row keeps
    the session it came from (``SessionConfig.snapshot``: identity, vault, token scopes and folders, tiers) so
    that process can rebuild it, and who decided (``decider``) so a second decider is told who was first."""
    conn.execute("ALTER TABLE pending_writes ADD COLUMN detached INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE pending_writes ADD COLUMN session_json TEXT")
    conn.execute("ALTER TABLE pending_writes ADD COLUMN decider TEXT")
    conn.execute("CREATE INDEX pending_writes_session ON pending_writes(session_id, id)")


def m045_landed_for_review(conn: apsw.Connection) -> None:
    """The writes that landed under ``review.mode = after``, listed for the person until they keep or undo
    each (``server.activity.landed``): the call's own provenance row, and when the person marked it reviewed.
    An undo is read from provenance (a revert of the call), never kept twice here."""
    conn.execute(
        """CREATE TABLE landed_writes (
             invocation_id INTEGER PRIMARY KEY,  -- the call's provenance row (tool_invocations.id)
             session_id TEXT NOT NULL,
             at REAL NOT NULL,
             kept_at REAL                         -- the person looked and kept it (NULL: still listed)
           )"""
    )
    conn.execute("CREATE INDEX landed_writes_open ON landed_writes(kept_at, invocation_id)")


def m046_oauth_clients(conn: apsw.Connection) -> None:
    """The OAuth clients of remote mode (``server.activity.remote_grants``): each registered (RFC 7591) client's
    metadata as the SDK models it (JSON), when it registered and when it was last used (unused ones are swept)."""
    conn.execute(
        "CREATE TABLE oauth_clients (client_id TEXT PRIMARY KEY, info TEXT NOT NULL, created_at REAL NOT NULL, "
        "used_at REAL) WITHOUT ROWID"
    )


def m047_oauth_grants(conn: apsw.Connection) -> None:
    """Remote grants: what the person consented to, one client at a time. Each stands on a kms token of kind
    ``remote`` (``token_id``: its session, scopes, expiry and revocation), so every token rule holds for it. The
    authorization requests waiting for consent and the codes consent gives are kept as SHA-256 hashes only."""
    conn.execute(
        """CREATE TABLE oauth_grants (id TEXT PRIMARY KEY, client_id TEXT NOT NULL, token_id TEXT NOT NULL,
               resource TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL) WITHOUT ROWID;
           CREATE TABLE oauth_requests (hash TEXT PRIMARY KEY, client_id TEXT NOT NULL, params TEXT NOT NULL,
               csrf TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL) WITHOUT ROWID;
           CREATE TABLE oauth_codes (hash TEXT PRIMARY KEY, grant_id TEXT NOT NULL, client_id TEXT NOT NULL,
               params TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL, used_at REAL) WITHOUT ROWID"""
    )


def m048_oauth_tokens(conn: apsw.Connection) -> None:
    """Access and refresh tokens of remote grants, as SHA-256 hashes: a refresh token once rotated keeps its row
    (``rotated_at``) so that presenting it again is seen, and ends its whole grant."""
    conn.execute(
        """CREATE TABLE oauth_tokens (hash TEXT PRIMARY KEY, kind TEXT NOT NULL, grant_id TEXT NOT NULL,
               scopes TEXT NOT NULL, resource TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,
               rotated_at REAL, revoked_at REAL) WITHOUT ROWID;
           CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id)"""
    )


def m049_remote_pairing(conn: apsw.Connection) -> None:
    """Pairing codes (``kms remote pair``), hashed, single use; and the count of wrong codes that locks pairing."""
    conn.execute(
        """CREATE TABLE remote_pairing (hash TEXT PRIMARY KEY, created_at REAL NOT NULL, expires_at REAL NOT NULL,
               used_at REAL) WITHOUT ROWID;
           CREATE TABLE remote_pairing_lock (id INTEGER PRIMARY KEY CHECK (id = 1), failures INTEGER NOT NULL,
               locked_until REAL)"""
    )


def m050_review_access(conn: apsw.Connection) -> None:
    """Who may open the review pages (``server.activity.review_access``): one-time links (``kms review``,
    ``kms review pair``), stored as digests, used once and soon expired; and the browser sessions and paired
    devices those links became, each a cookie whose digest is kept here, named, listed and revocable."""
    conn.execute(
        "CREATE TABLE review_links (digest TEXT PRIMARY KEY,"
        " purpose TEXT NOT NULL CHECK (purpose IN ('login', 'pair')), name TEXT, created_at REAL NOT NULL,"
        " expires_at REAL NOT NULL, used_at REAL) WITHOUT ROWID"
    )
    conn.execute(
        "CREATE TABLE review_sessions (id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE,"
        " kind TEXT NOT NULL CHECK (kind IN ('browser', 'device')), name TEXT, created_at REAL NOT NULL,"
        " expires_at REAL NOT NULL, last_used_at REAL, revoked_at REAL)"
    )


def m052_conflicts(conn: apsw.Connection) -> None:
    """Conflicts between two versions of one note (``server.index.conflicts``): a sync tool's conflict copy
    kept beside the note (``copy_path``; never indexed as a note), or a git merge that did not go clean
    (``copy_path`` NULL, both sides in ``mine``/``theirs``/``base``). An open conflict (``resolved_at``
    NULL) makes agents' writes to its note answer ``conflict``: the partial index keeps that check one
    lookup."""
    conn.execute(
        """CREATE TABLE conflicts (
            id INTEGER PRIMARY KEY,
            vault_id INTEGER NOT NULL,
            path TEXT NOT NULL,
            copy_path TEXT,
            source TEXT NOT NULL,
            mine BLOB,
            theirs BLOB,
            base BLOB,
            opened_at REAL NOT NULL,
            resolved_at REAL,
            resolution TEXT
        )"""
    )
    conn.execute("CREATE INDEX conflicts_open ON conflicts(vault_id, path) WHERE resolved_at IS NULL")
    conn.execute("CREATE INDEX conflicts_copy ON conflicts(vault_id, copy_path) WHERE resolved_at IS NULL")


def m053_vault_sync(conn: apsw.Connection) -> None:
    """What keeps a vault's folder in sync across machines (``server.vault.sync_tools``): a comma-separated
    list (``git``, ``syncthing``, ``icloud``, ...), ``''`` for none found, NULL for not looked yet (a vault
    registered before m053: looked at its next index). Which conflict-copy names are ambiguous enough to
    need it (iCloud's ``Note 2.md``, OneDrive's ``Note-PC.md``) is read from it."""
    conn.execute("ALTER TABLE vaults ADD COLUMN sync TEXT")


def m054_vault_git_mode(conn: apsw.Connection) -> None:
    """A vault's git mode (``server.writes.git_units``): NULL or 'off' (kms never runs git), 'commit' (every
    agent write unit is one commit), 'sync' (and the branch is fetched, merged and pushed by the service)."""
    conn.execute("ALTER TABLE vaults ADD COLUMN git_mode TEXT")


def m055_git_state(conn: apsw.Connection) -> None:
    """What kms's git work last did for a vault, for ``kms status`` and ``kms doctor`` (a failed push or
    commit is a state the person sees, never only a log line): one row per vault in git mode; and the write
    units waiting for their commit (``git_pending``)."""
    conn.execute(
        """CREATE TABLE git_state (
             vault_id INTEGER PRIMARY KEY,
             committed_at REAL,
             commit_error TEXT,
             fetched_at REAL,
             fetch_error TEXT,
             merged_at REAL,
             merge_error TEXT,
             pushed_at REAL,
             push_error TEXT,
             push_error_at REAL,
             unpushed INTEGER NOT NULL DEFAULT 0
           )"""
    )
    # the units kept in the answer and committed after it (``server.vault.git_units``): a row lives until its
    # commit is made, so a process that dies first leaves it for the next to commit
    conn.execute(
        """CREATE TABLE git_pending (
             id INTEGER PRIMARY KEY,
             vault_id INTEGER NOT NULL,
             invocation_id INTEGER NOT NULL,
             session_id TEXT NOT NULL,
             tool TEXT NOT NULL,
             approver TEXT NOT NULL,
             author_name TEXT NOT NULL,
             author_email TEXT NOT NULL,
             files TEXT NOT NULL,
             at REAL NOT NULL
           )"""
    )


def m056_index_state(conn: apsw.Connection) -> None:
    """A new vault's first index is committed in two transactions (``server.index.cold``): its notes and
    their search rows, then their tags, links, counts and history. ``vaults.index_state`` is NULL once a
    vault's index is complete, ``'searchable'`` between the two (what ``kms status``, the dashboard and the
    agents' answers say; the next index completes a vault left so by a crash)."""
    conn.execute("ALTER TABLE vaults ADD COLUMN index_state TEXT")
