"""The first schema's migrations (m001-m013: the index, agent activity, embeddings, privacy, dialects,
orientation, the person's controls). Applied ones are never edited; ``migrations.MIGRATIONS`` orders them
with the later ones."""

from __future__ import annotations

import apsw


def m001_initial(conn: apsw.Connection) -> None:
    """Vaults, notes (the manifest lives on the row), FTS5, tags, links, headings."""
    conn.execute(
        """
        CREATE TABLE vaults (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            root TEXT NOT NULL,
            added_at REAL NOT NULL,
            last_indexed_at REAL
        );
        CREATE TABLE notes (                     -- small columns first: body last keeps scans cheap
            rid INTEGER PRIMARY KEY,              -- internal, joins and FTS rowid
            id TEXT NOT NULL UNIQUE,              -- public, stable note id
            vault_id INTEGER NOT NULL REFERENCES vaults(id) ON DELETE CASCADE,
            path TEXT NOT NULL,                   -- vault-relative, '/'-separated
            folder TEXT NOT NULL,                 -- '' for the vault root
            title TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '',        -- space-separated, for FTS
            aliases TEXT,                         -- JSON list
            fm_error TEXT,                        -- why frontmatter was not parsed (flagged)
            summary_state TEXT NOT NULL DEFAULT 'none',
            summary_hash TEXT,
            summary_text TEXT,
            content_hash TEXT NOT NULL,           -- sha256 of the file bytes: the version
            size_bytes INTEGER NOT NULL,
            token_estimate INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,             -- file mtime, seconds
            indexed_at REAL NOT NULL,
            hidden_at REAL,                       -- DB-only state: survives reindex
            frontmatter TEXT,                     -- JSON object, NULL if none
            body TEXT NOT NULL,                   -- without frontmatter and summary block
            UNIQUE (vault_id, path)
        );
        CREATE INDEX notes_recent ON notes(updated_at DESC, id);
        -- kept in step by server/index/indexer.py (direct inserts: triggers halve insert speed)
        CREATE VIRTUAL TABLE notes_fts USING fts5(
            title, body, tags, content='notes', content_rowid='rid',
            tokenize='unicode61 remove_diacritics 2'
        );
        -- ranking lives in the table config so 'ORDER BY rank' streams hits (10x faster than bm25() in SQL)
        INSERT INTO notes_fts(notes_fts, rank) VALUES ('rank', 'bm25(10.0, 1.0, 5.0)');
        CREATE TABLE note_tags (
            rid INTEGER NOT NULL REFERENCES notes(rid) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (rid, tag)
        ) WITHOUT ROWID;
        CREATE INDEX note_tags_tag ON note_tags(tag);
        CREATE TABLE note_keys (                 -- what a wiki-link may name
            key TEXT NOT NULL,                    -- lower-cased title, path or alias
            vault_id INTEGER NOT NULL,
            rid INTEGER NOT NULL REFERENCES notes(rid) ON DELETE CASCADE,
            kind INTEGER NOT NULL,                -- 1 path, 2 title, 3 alias
            PRIMARY KEY (key, vault_id, kind, rid)
        ) WITHOUT ROWID;
        CREATE INDEX note_keys_rid ON note_keys(rid);
        CREATE TABLE links (
            src_rid INTEGER NOT NULL REFERENCES notes(rid) ON DELETE CASCADE,
            ord INTEGER NOT NULL,
            target TEXT NOT NULL,                 -- as written, before '#', '^' or '|'
            target_key TEXT NOT NULL,             -- lower-cased, no '.md'
            heading TEXT,
            block TEXT,
            alias TEXT,
            embed INTEGER NOT NULL DEFAULT 0,
            in_frontmatter INTEGER NOT NULL DEFAULT 0,
            line INTEGER NOT NULL,
            dst_rid INTEGER,                      -- NULL while unresolved (forward link)
            PRIMARY KEY (src_rid, ord)
        ) WITHOUT ROWID;
        CREATE INDEX links_target ON links(target_key);
        CREATE INDEX links_dst ON links(dst_rid);
        CREATE TABLE headings (
            rid INTEGER NOT NULL REFERENCES notes(rid) ON DELETE CASCADE,
            ord INTEGER NOT NULL,
            level INTEGER NOT NULL,
            text TEXT NOT NULL,
            line INTEGER NOT NULL,
            PRIMARY KEY (rid, ord)
        ) WITHOUT ROWID;
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        """
    )


def m002_agent_activity(conn: apsw.Connection) -> None:
    """Sessions, read tracking, provenance of tool calls and live write counters."""
    conn.execute(
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,                   -- 'launcher', 'server', 'demo', 'person'
            started_at REAL NOT NULL,
            last_seen_at REAL NOT NULL,
            ended_at REAL,
            pid INTEGER,
            cwd TEXT,
            argv TEXT,                            -- JSON list
            exit_code INTEGER,
            vault TEXT
        );
        CREATE TABLE note_reads (
            note_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            count INTEGER NOT NULL,
            first_at REAL NOT NULL,
            last_at REAL NOT NULL,
            PRIMARY KEY (note_id, session_id)
        ) WITHOUT ROWID;
        CREATE INDEX note_reads_session ON note_reads(session_id, last_at DESC);
        CREATE TABLE tool_invocations (
            id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            session_id TEXT NOT NULL,
            actor TEXT NOT NULL DEFAULT 'agent',  -- 'agent' or 'person'
            tool TEXT NOT NULL,
            note_id TEXT,
            vault TEXT,
            path TEXT,
            title TEXT,
            input_summary TEXT NOT NULL,
            status TEXT NOT NULL,                 -- success, error, conflict, rate-limited, ...
            error TEXT,                           -- error kind when not success
            message TEXT,
            lines_added INTEGER NOT NULL DEFAULT 0,
            bytes_before INTEGER,
            bytes_after INTEGER,
            inserted_text TEXT,                   -- exactly what was inserted ...
            insert_offset INTEGER,                -- ... at this character offset of the new file text
            props_before TEXT,                    -- JSON: frontmatter values replaced or removed
            props_after TEXT,                     -- JSON: frontmatter values set
            hash_before TEXT,
            hash_after TEXT,
            reverts_id INTEGER                    -- for a revert: the invocation it took back
        );
        CREATE INDEX tool_invocations_session ON tool_invocations(session_id, id);
        CREATE INDEX tool_invocations_note ON tool_invocations(note_id, id);
        CREATE VIRTUAL TABLE tool_invocations_fts USING fts5(
            tool, title, input_summary, inserted_text, message,
            content='tool_invocations', content_rowid='id'
        );
        CREATE TRIGGER tool_invocations_ai AFTER INSERT ON tool_invocations BEGIN
            INSERT INTO tool_invocations_fts(rowid, tool, title, input_summary, inserted_text, message)
            VALUES (new.id, new.tool, new.title, new.input_summary, new.inserted_text, new.message);
        END;
        CREATE TABLE write_counters (
            session_id TEXT PRIMARY KEY,
            window_count INTEGER NOT NULL,        -- writes in the last 60 s
            total INTEGER NOT NULL,
            per_minute INTEGER NOT NULL,
            per_session INTEGER NOT NULL,
            window_frees_at REAL,                 -- when the oldest write in the window expires
            updated_at REAL NOT NULL
        );
        CREATE TABLE write_events (
            session_id TEXT NOT NULL,
            at REAL NOT NULL
        );
        CREATE INDEX write_events_session ON write_events(session_id, at);
        """
    )


def m003_embeddings(conn: apsw.Connection) -> None:
    """Chunks of notes, their vectors keyed by content hash, and which notes are embedded.

    Vectors are keyed by the hash of the exact text embedded, not by note, so an unchanged chunk
    is never embedded again (an edit, a rename or a full reindex reuses them). ``chunks.id`` is
    AUTOINCREMENT (never reused) and triggers bump ``embed_generation`` on every chunk insert
    or delete, so the in-memory vector matrix checks one row to know whether to refresh and then
    loads only ids above the last one it saw. ``note_embed_state`` records the note version
    whose chunks are stored, which makes ``kms embed`` resumable after an interruption.
    """
    conn.execute(
        """
        CREATE TABLE embeddings (
            hash TEXT PRIMARY KEY,                -- sha256 of model name + the embedded text
            vector BLOB NOT NULL,                 -- float32 little-endian, L2-normalised
            created_at REAL NOT NULL
        );
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            rid INTEGER NOT NULL REFERENCES notes(rid) ON DELETE CASCADE,
            ord INTEGER NOT NULL,
            heading TEXT,                         -- "Parent > Section", NULL before the first heading
            hash TEXT NOT NULL,                   -- -> embeddings.hash
            text TEXT NOT NULL,                   -- the section text, without the title prefix
            tokens INTEGER NOT NULL,
            UNIQUE (rid, ord)
        );
        CREATE INDEX chunks_hash ON chunks(hash);
        CREATE TABLE note_embed_state (
            rid INTEGER PRIMARY KEY REFERENCES notes(rid) ON DELETE CASCADE,
            content_hash TEXT NOT NULL,           -- notes.content_hash the chunks were made from
            title TEXT NOT NULL,                  -- the title is in every chunk's prefix
            model TEXT NOT NULL,
            chunks INTEGER NOT NULL,
            embedded_at REAL NOT NULL
        );
        CREATE TABLE embed_generation (id INTEGER PRIMARY KEY CHECK (id = 1), gen INTEGER NOT NULL);
        INSERT INTO embed_generation VALUES (1, 0);
        CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
            UPDATE embed_generation SET gen = gen + 1 WHERE id = 1;
        END;
        CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
            UPDATE embed_generation SET gen = gen + 1 WHERE id = 1;
        END;
        """
    )


def m004_hidden_index(conn: apsw.Connection) -> None:
    """Hidden notes are few: a partial index makes "how many are hidden" free for search paging."""
    conn.execute("CREATE INDEX notes_hidden ON notes(hidden_at) WHERE hidden_at IS NOT NULL")


def m005_reverts_index(conn: apsw.Connection) -> None:
    """ "Was this write reverted?" is asked for every listed invocation; without an index each
    question scanned the whole provenance table."""
    conn.execute("CREATE INDEX tool_invocations_reverts ON tool_invocations(reverts_id) WHERE reverts_id IS NOT NULL")


def m006_fts_tuning(conn: apsw.Connection) -> None:
    """Bigger FTS5 leaves (one per database page) and a 16 MiB in-memory term buffer: a cold index
    writes a few large segments instead of many small ones, so it loads faster and merges less. The
    buffer only fills within one write transaction, so small writes are unaffected."""
    page = conn.execute("PRAGMA page_size").fetchall()[0][0]
    if page > 4096:  # type: ignore[operator]  # (an applied migration: types only, never its code)
        conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('pgsz', ?)", (page - 64,))  # type: ignore[operator]
    conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('hashsize', ?)", (16 * 1024 * 1024,))


def m007_change_kind(conn: apsw.Connection) -> None:
    """Each provenance row names the kind of change it made (``server.activity.changes``), so revert
    and the dashboard key on what happened, not on which tool did it. Old rows get the kind their
    tool made; calls that changed nothing (refusals, no-ops) have none."""
    conn.execute("ALTER TABLE tool_invocations ADD COLUMN change_kind TEXT")
    conn.execute(
        """UPDATE tool_invocations SET change_kind = CASE
             WHEN status != 'success' THEN NULL
             WHEN tool = 'kms_create' THEN 'file-created'
             WHEN tool IN ('kms_append', 'kms_insert_at') AND inserted_text IS NOT NULL THEN 'text-inserted'
             WHEN tool = 'kms_update_properties' AND props_after IS NOT NULL AND props_after != '{}'
               THEN 'properties-changed'
             WHEN tool = 'revert' AND props_after IS NOT NULL AND props_after != '{}' THEN 'properties-changed'
             WHEN tool = 'revert' AND hash_after IS NULL THEN 'file-deleted'
             WHEN tool = 'revert' THEN 'text-removed'
           END"""
    )


def m008_privacy_rules(conn: apsw.Connection) -> None:
    """Privacy by rule (``server.index.privacy``): ``hidden_at`` becomes the one effective flag every
    query filters on, set from the person's stamp (``hidden_stamp``, what ``kms hide`` wrote into
    ``hidden_at`` before) or the rule that hides the note (``hidden_rule``, set at index time).
    ``link_to`` is the note a symlinked file points at; ``vaults.privacy_rules`` the rules (JSON) the
    vault's notes were last judged by (a change re-judges them all)."""
    conn.execute("ALTER TABLE notes ADD COLUMN hidden_stamp REAL")
    conn.execute("ALTER TABLE notes ADD COLUMN hidden_rule TEXT")
    conn.execute("ALTER TABLE notes ADD COLUMN link_to TEXT")
    conn.execute("ALTER TABLE vaults ADD COLUMN privacy_rules TEXT")
    conn.execute("UPDATE notes SET hidden_stamp = hidden_at WHERE hidden_at IS NOT NULL")
    conn.execute("CREATE INDEX notes_link_to ON notes(link_to) WHERE link_to IS NOT NULL")


def m009_file_changes(conn: apsw.Connection) -> None:
    """The per-file changes of a call that changed several files, or replaced text (kms_edit, kms_rename,
    kms_move, kms_trash, and their reverts): one row per file, the hunk that differs and where the file
    went, so a revert can rebuild every file exactly and the dashboard can show a diff per file."""
    conn.execute(
        """CREATE TABLE tool_file_changes (
             invocation_id INTEGER NOT NULL REFERENCES tool_invocations(id),
             seq INTEGER NOT NULL,
             path TEXT NOT NULL,
             new_path TEXT,
             hunk_offset INTEGER NOT NULL,
             old_text TEXT NOT NULL,
             new_text TEXT NOT NULL,
             hash_before TEXT NOT NULL,
             hash_after TEXT NOT NULL,
             hidden INTEGER NOT NULL DEFAULT 0,
             PRIMARY KEY (invocation_id, seq)
           ) WITHOUT ROWID"""
    )


def m010_overwritten(conn: apsw.Connection) -> None:
    """When a later save dropped the text an agent's successful write inserted (the watcher's check,
    ``server.activity.overwrites``): the dashboard shows the row as overwritten, not as ok."""
    conn.execute("ALTER TABLE tool_invocations ADD COLUMN overwritten_at REAL")
    conn.execute("CREATE INDEX tool_invocations_overwritten ON tool_invocations(id) WHERE overwritten_at IS NOT NULL")


def m011_dialects(conn: apsw.Connection) -> None:
    """The model of a vault as its own tool sees it (``server.vault.dialects``): a vault's dialect
    (NULL until detected: the next index detects it and re-parses every note, since Markdown links,
    attachments and titles are read now); what the FTS title column holds when it is more than the
    title (the file stem behind a frontmatter title, a Dendron ``desc``); a link's second key (a
    Markdown link's path as written), the vault an explicit cross-vault link names, and the attachment
    it resolved to; the vault's other files (attachments) by the keys a link may name them by; and
    recent notes ordered by path among equal dates (a git checkout gives every file one mtime). The
    FTS table is rebuilt over a view of the notes, so its title column can hold the search title."""
    conn.execute("ALTER TABLE vaults ADD COLUMN dialect TEXT")
    conn.execute("ALTER TABLE notes ADD COLUMN search_title TEXT")
    conn.execute("ALTER TABLE links ADD COLUMN alt_key TEXT")
    conn.execute("ALTER TABLE links ADD COLUMN target_vault TEXT")
    conn.execute("ALTER TABLE links ADD COLUMN dst_file TEXT")
    conn.execute("CREATE INDEX links_alt ON links(alt_key) WHERE alt_key IS NOT NULL")
    conn.execute(
        """CREATE TABLE attachments (
             key TEXT NOT NULL,                  -- lower-cased path, file name or shorter path ending
             vault_id INTEGER NOT NULL REFERENCES vaults(id) ON DELETE CASCADE,
             kind INTEGER NOT NULL,              -- 1 path, 2 file name, 4 path ending
             path TEXT NOT NULL,
             folder TEXT NOT NULL,
             PRIMARY KEY (key, vault_id, kind, path)
           ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX attachments_vault ON attachments(vault_id, path)")
    conn.execute("DROP INDEX IF EXISTS notes_recent")
    conn.execute("CREATE INDEX notes_recent ON notes(updated_at DESC, path, id)")
    # The FTS title column holds search_title when there is one: its content is a view, so what FTS5
    # reads back (deletes, 'rebuild', 'integrity-check') is exactly what was indexed.
    conn.execute(
        """DROP TABLE notes_fts;
        CREATE VIEW notes_fts_source AS SELECT rid, coalesce(search_title, title) AS title, body, tags FROM notes;
        CREATE VIRTUAL TABLE notes_fts USING fts5(
            title, body, tags, content='notes_fts_source', content_rowid='rid',
            tokenize='unicode61 remove_diacritics 2'
        );
        INSERT INTO notes_fts(notes_fts, rank) VALUES ('rank', 'bm25(10.0, 1.0, 5.0)');"""
    )
    page = conn.execute("PRAGMA page_size").fetchall()[0][0]
    if page > 4096:  # type: ignore[operator]  # as m006_fts_tuning
        conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('pgsz', ?)", (page - 64,))  # type: ignore[operator]
    conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('hashsize', ?)", (16 * 1024 * 1024,))
    conn.execute("INSERT INTO notes_fts(notes_fts) VALUES ('rebuild')")


def m012_orientation(conn: apsw.Connection) -> None:
    """What agents orient by (issue 14): the identity a session works for (``sessions.project``: a
    ``kms claude`` working directory or a host's project), so kms_start can tell what changed since
    that identity's previous session ended; the visible notes by folder, so a folder listing and its
    subfolder counts read a small index instead of every note row; the flagged notes, the notes by
    creation time and the unresolved links, so kms_start's health and "what changed" read a few index
    entries, not 10,000 rows."""
    conn.execute("ALTER TABLE sessions ADD COLUMN project TEXT")
    conn.execute("CREATE INDEX sessions_project ON sessions(project, ended_at) WHERE project IS NOT NULL")
    conn.execute(
        "CREATE INDEX notes_visible_folder ON notes(folder, vault_id, updated_at DESC, id) WHERE hidden_at IS NULL"
    )
    conn.execute("CREATE INDEX notes_flagged ON notes(vault_id) WHERE fm_error IS NOT NULL")  # few: health is free
    conn.execute("CREATE INDEX notes_created ON notes(created_at)")  # "created since your last visit"
    conn.execute("CREATE INDEX links_unresolved ON links(target_key, target) WHERE dst_rid IS NULL")  # the few missing


def m013_control(conn: apsw.Connection) -> None:
    """The person's live controls: a session's control state (active, paused, revoked), which every write call of
    a running server reads, and the calls staged for approval (``write.approval``) with the exact per-file
    diff they would apply and the person's decision."""
    conn.execute("ALTER TABLE sessions ADD COLUMN control TEXT NOT NULL DEFAULT 'active'")  # active, paused, revoked
    conn.execute("ALTER TABLE sessions ADD COLUMN control_at REAL")
    conn.execute("ALTER TABLE sessions ADD COLUMN control_reason TEXT")
    conn.execute(
        """CREATE TABLE pending_writes (
             id INTEGER PRIMARY KEY,
             created_at REAL NOT NULL,
             expires_at REAL NOT NULL,
             session_id TEXT NOT NULL,
             tool TEXT NOT NULL,
             input_summary TEXT NOT NULL,
             input_json TEXT NOT NULL,
             files_json TEXT NOT NULL,        -- JSON list of staged files: path, hashes, diff, lines
             lines INTEGER NOT NULL,
             status TEXT NOT NULL DEFAULT 'pending',  -- pending, approved, rejected, expired, cancelled
             decided_at REAL,
             reason TEXT,
             decision_id INTEGER,             -- the person's provenance row (approve / reject)
             invocation_id INTEGER,           -- the call's own provenance row, once it ended
             outcome TEXT                     -- applied, or the error kind it ended with
           )"""
    )
    conn.execute("CREATE INDEX pending_writes_open ON pending_writes(status, id)")
