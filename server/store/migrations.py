"""Named, recorded schema migrations (in the spirit of sqlite-utils ``Migrations``).

Each migration is a function ``mNNN_name(conn)`` appended to ``MIGRATIONS``.
Never edit one that has shipped: add a new one. Applied names are recorded in
``_migrations`` so every process upgrades an older database on open. The first thirteen are
``server.store.migrations_first``; m014-m017 never existed (the numbers were skipped), so the list
goes from m013 to m018. m044-m056 (the remote, review and sync round) are
``server.store.migrations_remote_sync``.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Callable
from typing import Any

import apsw

from server.store.kept_counts import m030_kept_counts, m042_attachments_not_unresolved
from server.store.migrate_note_ids import m057_machine_independent_ids
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
from server.store.migrations_remote_sync import (  # the remote, review and sync round
    m044_detached_staging,
    m045_landed_for_review,
    m046_oauth_clients,
    m047_oauth_grants,
    m048_oauth_tokens,
    m049_remote_pairing,
    m050_review_access,
    m052_conflicts,
    m053_vault_sync,
    m054_vault_git_mode,
    m055_git_state,
    m056_index_state,
)

Migration = Callable[[apsw.Connection], None]


def m018_folder_listing(conn: apsw.Connection) -> None:
    """A folder's visible notes in the order a folder listing pages them (newest first, then path, then id):
    without it an unscoped ``kms_list_folder`` read and sorted every note of the folder for each 50-card
    page, a cost that grew with the folder; with it a page is its 51 index entries.
    (``notes_visible_folder`` serves the vault-scoped listing and the counts by folder.)"""
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


def m024_session_records(conn: apsw.Connection) -> None:
    """What the agent host told kms about a session through its hooks (``server.activity.session_material``):
    one row per session (the host's conversation id, the end and its reason, the compaction summary, the
    last assistant message, the session note once written), the agent's searches, the items it captured
    (``kms_capture``), and the files it changed outside kms with its own tools (PostToolUse), which the
    note history attributes to the session by vault path."""
    conn.execute(
        """
        CREATE TABLE session_records (
            session_id TEXT PRIMARY KEY,
            host_session TEXT,                  -- the host's own conversation id
            ended_at REAL,
            end_reason TEXT,
            compact_summary TEXT,
            last_message TEXT,
            prompts TEXT,                        -- JSON list, only when capture.prompts is on
            note_id TEXT,                        -- the session note, once written
            note_vault TEXT,
            note_path TEXT,
            note_hash TEXT,                      -- what kms last wrote there (a person's edit is never overwritten)
            asked_at REAL,                       -- when the Stop rule asked the agent to capture
            updated_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE session_searches (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            at REAL NOT NULL,
            tool TEXT NOT NULL,
            query TEXT NOT NULL
        );
        CREATE INDEX session_searches_session ON session_searches(session_id, id);
        CREATE TABLE session_captures (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            at REAL NOT NULL,
            kind TEXT NOT NULL,                  -- decision, finding, next, link
            text TEXT NOT NULL
        );
        CREATE INDEX session_captures_session ON session_captures(session_id, id);
        CREATE TABLE session_files (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            at REAL NOT NULL,
            tool TEXT NOT NULL,                  -- the host's tool: Write, Edit, MultiEdit, NotebookEdit, Bash
            file TEXT NOT NULL,                  -- absolute, as the host named it
            vault_id INTEGER,                    -- the vault it lies in (NULL: outside every vault)
            path TEXT,                           -- vault-relative
            hash_after TEXT                      -- sha256 of the file right after, when it could be read
        );
        CREATE INDEX session_files_session ON session_files(session_id, id);
        CREATE INDEX session_files_path ON session_files(vault_id, path, at) WHERE vault_id IS NOT NULL;
        """
    )


def m025_note_history(conn: apsw.Connection) -> None:
    """Every version of every note kms has seen (``server.store.version_blobs``, docs/history.md): a note's
    line of versions (``history_notes``, one across moves, kept after a delete), the ids it had
    (``history_ids``), its versions (``history_versions``) and their bytes, once per content hash,
    zstd-compressed, a small edit as a delta against a neighbouring version (``history_blobs``)."""
    conn.execute(
        """CREATE TABLE history_notes (
            hid INTEGER PRIMARY KEY,
            vault_id INTEGER NOT NULL,
            rid INTEGER UNIQUE,
            note_id TEXT NOT NULL,
            path TEXT NOT NULL,
            last_bid INTEGER,
            deleted_at REAL
        )"""
    )
    conn.execute("CREATE INDEX history_notes_path ON history_notes(vault_id, path) WHERE rid IS NULL")
    conn.execute("CREATE INDEX history_notes_gone ON history_notes(last_bid) WHERE rid IS NULL")
    conn.execute("CREATE TABLE history_ids (note_id TEXT PRIMARY KEY, hid INTEGER NOT NULL) WITHOUT ROWID")
    conn.execute(
        """CREATE TABLE history_versions (
            vid INTEGER PRIMARY KEY,
            hid INTEGER NOT NULL,
            at REAL NOT NULL,
            path TEXT NOT NULL,
            bid INTEGER,
            size INTEGER NOT NULL,
            how TEXT NOT NULL,
            hidden INTEGER NOT NULL DEFAULT 0
        )"""
    )
    conn.execute("CREATE INDEX history_versions_note ON history_versions(hid, vid)")
    conn.execute("CREATE INDEX history_versions_bid ON history_versions(bid)")
    conn.execute(
        """CREATE TABLE history_blobs (
            bid INTEGER PRIMARY KEY AUTOINCREMENT,
            hash TEXT NOT NULL UNIQUE,
            base INTEGER,
            depth INTEGER NOT NULL,
            size INTEGER NOT NULL,
            data BLOB NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX history_blobs_base ON history_blobs(base) WHERE base IS NOT NULL")
    conn.execute("CREATE TABLE history_dicts (vault_id INTEGER PRIMARY KEY, bid INTEGER NOT NULL)")


def m026_allowlist_paths(conn: apsw.Connection) -> None:
    """Allowlist entries are globs over a note's path now (``server.config.allowlist``; the settings file
    is upgraded by ``server.config.settings_file.upgrade``): a standing token's ``folder:`` scopes and a
    launcher session's ``KMS_WRITE_ALLOWLIST`` are rewritten to allow exactly the notes they did."""

    for tid, scopes, config in list(conn.execute("SELECT id, scopes, config FROM tokens")):
        words = [
            f"folder:{_path_glob(w[7:])}" if w.startswith("folder:") else w for w in re.split(r"[\s,]+", scopes) if w
        ]
        env = json.loads(config) if config else None
        if isinstance(env, dict) and env.get("KMS_WRITE_ALLOWLIST", "").strip():
            old = [p for p in re.split(r"[,\n\r]+", env["KMS_WRITE_ALLOWLIST"]) if p.strip()]
            env["KMS_WRITE_ALLOWLIST"] = ",".join(dict.fromkeys(_path_glob(p) for p in old))
        conn.execute(
            "UPDATE tokens SET scopes = ?, config = ? WHERE id = ?",
            (" ".join(words), json.dumps(env) if env is not None else config, tid),
        )


def m027_note_properties(conn: apsw.Connection) -> None:
    """A note's properties, searchable and filterable (``server.index.properties``): one ``note_props`` row
    per value (each item of a list), its text lower-cased and, when it is a number, the number; and the
    values' text as a fourth FTS column (``props``), ranked below titles, tags and body text; and a fifth,
    ``cjk``, for words in scripts written without spaces (``server.index.scripts``). Every note is read
    again at the next ``kms index`` or watcher scan (its hash forgotten) to fill them."""
    conn.execute(
        "CREATE TABLE note_props (rid INTEGER NOT NULL REFERENCES notes(rid) ON DELETE CASCADE, "
        "key TEXT NOT NULL, value TEXT NOT NULL, num REAL, ord INTEGER NOT NULL, PRIMARY KEY (rid, key, ord)) "
        "WITHOUT ROWID"
    )
    conn.execute("CREATE INDEX note_props_value ON note_props(key, value)")
    conn.execute("CREATE INDEX note_props_num ON note_props(key, num) WHERE num IS NOT NULL")
    conn.execute("ALTER TABLE notes ADD COLUMN search_props TEXT")
    conn.execute("ALTER TABLE notes ADD COLUMN search_cjk TEXT")  # server.index.scripts: runs without spaces
    conn.execute(
        """DROP TABLE notes_fts;
        DROP VIEW notes_fts_source;
        CREATE VIEW notes_fts_source AS
            SELECT rid, coalesce(search_title, title) AS title, body, tags, search_props AS props,
                   search_cjk AS cjk FROM notes;
        CREATE VIRTUAL TABLE notes_fts USING fts5(
            title, body, tags, props, cjk, content='notes_fts_source', content_rowid='rid',
            tokenize='unicode61 remove_diacritics 2'
        );
        INSERT INTO notes_fts(notes_fts, rank) VALUES ('rank', 'bm25(10.0, 1.0, 5.0, 0.5, 1.0)');"""
    )
    page = conn.execute("PRAGMA page_size").fetchall()[0][0]
    if page > 4096:  # type: ignore[operator]  # as m006_fts_tuning
        conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('pgsz', ?)", (page - 64,))  # type: ignore[operator]
    conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('hashsize', ?)", (16 * 1024 * 1024,))
    conn.execute("INSERT INTO notes_fts(notes_fts) VALUES ('rebuild')")
    conn.execute("UPDATE notes SET content_hash = '', mtime_ns = 0")


def m028_approval_channel(conn: apsw.Connection) -> None:
    """Where the person decided a staged call (``server.activity.approvals.CHANNELS``: host, dashboard, cli),
    which the dashboard shows beside the decision, and whether the agent's host is asking the person about it
    right now (with ``write.approval_channel = host`` the dashboard's bell waits until the host stops asking)."""
    conn.execute("ALTER TABLE pending_writes ADD COLUMN channel TEXT")
    conn.execute("ALTER TABLE pending_writes ADD COLUMN asking_host INTEGER NOT NULL DEFAULT 0")


def _path_glob(old: str) -> str:
    """A version 1 folder glob as the path glob that allows exactly the same notes (frozen here:
    ``server.config.allowlist.from_folder_glob`` is the same rule, a layer above)."""
    p = old.strip().strip("/")
    return "*" if p in ("", ".") else f"{p}/*"


def m029_staged_why(conn: apsw.Connection) -> None:
    """Why a write was staged for the person when ``write.approval`` did not ask for it: its text looks like
    instructions planted for an agent (``server.vault.planted``). A JSON list of reasons; NULL otherwise."""
    conn.execute("ALTER TABLE pending_writes ADD COLUMN why TEXT")


def m032_dendron_vaults(conn: apsw.Connection) -> None:
    """The Dendron vaults a kms vault holds, as its workspace's ``dendron.yml`` names them
    (``server.vault.registry.settle_workspace``), so ``[[dendron://name/note]]`` resolves into the kms vault
    and folder that hold that Dendron vault, whatever the kms vault is called (``server.index.link_vaults``).
    A workspace added by its root has a row per vault (``folder``: where it is in the kms vault); a vault
    folder added by itself has one (``folder`` ''). Vaults registered before are read at their next index."""
    conn.execute(
        """
        CREATE TABLE dendron_vaults (
            vault_id INTEGER NOT NULL REFERENCES vaults(id) ON DELETE CASCADE,
            name TEXT NOT NULL,         -- the Dendron vault's name: what dendron://name/ says
            folder TEXT NOT NULL,       -- where its notes are in the kms vault ('' for its root)
            key_prefix TEXT NOT NULL,   -- the folder as a link key starts ('' or 'folder/', lower-cased)
            workspace TEXT NOT NULL,    -- the workspace root (the folder of dendron.yml)
            PRIMARY KEY (vault_id, name)
        ) WITHOUT ROWID;
        CREATE INDEX dendron_vaults_name ON dendron_vaults(name, workspace);
        """
    )


def m037_history_by_path(conn: apsw.Connection) -> None:
    """The versions of a vault path around a time: the dashboard's feed joins each edit a session's hooks
    reported (``session_files``) to the version kms saw of it (``server.activity.outside_feed``), and the
    session undo finds the notes those reports name, without reading every version kept."""
    conn.execute("CREATE INDEX history_versions_path ON history_versions(path, at)")


def m038_stamps_follow_notes(conn: apsw.Connection) -> None:
    """A ``kms hide`` stamp outlives its note's row (dogfood finding cli #1): a stamped row that goes (a
    delete, the trash, ``kms vault remove``) leaves its stamp in ``stamps_gone`` (by vault name, so a vault
    removed and added again keeps it), and a new row of that vault at the same path, or with the same bytes,
    takes it back (``kms restore``, ``kms trash restore``, a file put back, the vault re-added). Triggers,
    so every way a row is inserted or deleted (one file, a cold index's batches) follows the rule; a new
    note taken for the stamped one is hidden too: hiding too much is the safe side (``kms unhide``)."""
    best = """SELECT g.rowid FROM stamps_gone g JOIN vaults v ON v.name = g.vault
        WHERE v.id = new.vault_id AND (g.path = new.path OR g.content_hash = new.content_hash)
        ORDER BY g.path = new.path AND g.content_hash = new.content_hash DESC, g.path = new.path DESC,
            g.gone_at DESC LIMIT 1"""
    conn.execute(
        f"""
        CREATE TABLE stamps_gone (
            vault TEXT NOT NULL,
            path TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            stamp REAL NOT NULL,
            gone_at REAL NOT NULL
        );
        CREATE INDEX stamps_gone_path ON stamps_gone(vault, path);
        CREATE INDEX stamps_gone_hash ON stamps_gone(vault, content_hash);
        CREATE TRIGGER stamp_gone BEFORE DELETE ON notes WHEN old.hidden_stamp IS NOT NULL BEGIN
            INSERT INTO stamps_gone SELECT name, old.path, old.content_hash, old.hidden_stamp,
                (julianday('now') - 2440587.5) * 86400.0 FROM vaults WHERE id = old.vault_id;
        END;
        CREATE TRIGGER stamp_back AFTER INSERT ON notes WHEN new.hidden_stamp IS NULL AND EXISTS ({best}) BEGIN
            UPDATE notes SET hidden_stamp = (SELECT stamp FROM stamps_gone WHERE rowid = ({best})),
                hidden_at = (SELECT stamp FROM stamps_gone WHERE rowid = ({best})) WHERE rid = new.rid;
            DELETE FROM stamps_gone WHERE rowid = ({best});
        END;
        """
    )


def m031_manifest_index(conn: apsw.Connection) -> None:
    """What ``kms index`` compares every file's stat with (path, mtime, size; the note's rid rides along),
    in a narrow index: an unchanged vault is then checked without reading the notes' wide rows."""
    conn.execute("CREATE INDEX notes_manifest ON notes(vault_id, path, mtime_ns, size_bytes)")


def m043_composed_name_keys(conn: apsw.Connection) -> None:
    """Names are looked up in Unicode's composed form now (``server.vault.paths.name_key``): the notes with
    a decomposed key or link target (a macOS file name) are read again at the next ``kms index`` or watcher
    scan, and the attachments with one are found again by it (their links then resolved again). The rule
    is written out here as it was when this ran, not imported (the store layer comes first)."""

    def composed(*name: Any) -> str | None:  # one argument: a key (text) or NULL
        return None if name[0] is None else unicodedata.normalize("NFC", str(name[0])).lower()

    conn.create_scalar_function("kms_composed", composed, 1, deterministic=True)
    conn.execute(
        """UPDATE notes SET content_hash = '', mtime_ns = 0
           WHERE rid IN (SELECT rid FROM note_keys WHERE key != kms_composed(key))
              OR rid IN (SELECT src_rid FROM links WHERE target_key != kms_composed(target_key)
                                                     OR alt_key != kms_composed(alt_key))"""
    )
    conn.execute(
        """DELETE FROM attachments WHERE (vault_id, path) IN
           (SELECT vault_id, path FROM attachments WHERE key != kms_composed(key))"""
    )


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
    m024_session_records,
    m025_note_history,
    m026_allowlist_paths,
    m027_note_properties,
    m028_approval_channel,
    m029_staged_why,
    m030_kept_counts,
    m031_manifest_index,
    m032_dendron_vaults,
    m037_history_by_path,
    m038_stamps_follow_notes,
    m042_attachments_not_unresolved,
    m043_composed_name_keys,
    m044_detached_staging,
    m045_landed_for_review,
    m046_oauth_clients,
    m047_oauth_grants,
    m048_oauth_tokens,
    m049_remote_pairing,
    m050_review_access,
    m052_conflicts,
    m053_vault_sync,
    m054_vault_git_mode,
    m055_git_state,
    m056_index_state,
    m057_machine_independent_ids,
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
