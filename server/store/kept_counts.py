"""Counts kept as the index changes, so what orients an agent (``kms_start``, ``kms_list_folder``, tags)
reads a few rows instead of grouping the whole vault on every call (m030).

Four tables, each exactly what a recomputation over the index gives (``RECOUNT``), visible notes only:

- ``kept_folders(vault_id, folder, notes)``: visible notes per stored folder;
- ``kept_tags(vault_id, tag, notes)``: visible notes carrying each tag;
- ``kept_unresolved(vault_id, target_key, links)``: links from visible notes that no note and no
  attachment answers (``UNRESOLVED``), by the linking note's vault and the name it links;
- ``kept_backlinks(dst_rid, sources)``: distinct visible notes linking to each note (not itself). Whether
  the linked note is itself visible, and its vault, are asked when read (only the winners' rows).

Triggers keep them in the transaction that changes the index, whoever writes (the indexer, the watcher,
a move, a privacy rule, a hide): a note's row carries its own contribution and that of its tags and
links while it is visible; a tag or link row counts while its note exists and is visible (while a note
is deleted its children go by cascade after its row, so its ``BEFORE DELETE`` trigger takes back all it
gave). A row whose count reaches 0 is deleted.

A cold index writes every row of a vault in one transaction: there ``suspended`` turns the triggers off
for the connection and ``rebuild`` recounts the four tables at the end, before the commit (per-row
triggers would cost more than the recount).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import apsw

UNRESOLVED = "{l}dst_rid IS NULL AND {l}dst_file IS NULL"  # a link to a file that exists is not missing
_VISIBLE_SRC = "EXISTS (SELECT 1 FROM notes WHERE rid = {r} AND hidden_at IS NULL)"
_VAULT_OF = "(SELECT vault_id FROM notes WHERE rid = {r})"

TABLES = """
CREATE TABLE kept_folders (vault_id INTEGER NOT NULL, folder TEXT NOT NULL, notes INTEGER NOT NULL,
                           PRIMARY KEY (vault_id, folder)) WITHOUT ROWID;
CREATE TABLE kept_tags (vault_id INTEGER NOT NULL, tag TEXT NOT NULL, notes INTEGER NOT NULL,
                        PRIMARY KEY (vault_id, tag)) WITHOUT ROWID;
CREATE TABLE kept_unresolved (vault_id INTEGER NOT NULL, target_key TEXT NOT NULL, links INTEGER NOT NULL,
                              PRIMARY KEY (vault_id, target_key)) WITHOUT ROWID;
CREATE INDEX kept_unresolved_top ON kept_unresolved(links DESC, target_key);
CREATE TABLE kept_backlinks (dst_rid INTEGER PRIMARY KEY, sources INTEGER NOT NULL);
CREATE INDEX kept_backlinks_top ON kept_backlinks(sources DESC, dst_rid);
"""


def _folder(sign: str, n: str) -> str:
    if sign == "+":
        return (
            f"INSERT INTO kept_folders VALUES ({n}.vault_id, {n}.folder, 1) "
            "ON CONFLICT DO UPDATE SET notes = notes + 1;"
        )
    return (
        f"UPDATE kept_folders SET notes = notes - 1 WHERE vault_id = {n}.vault_id AND folder = {n}.folder; "
        f"DELETE FROM kept_folders WHERE vault_id = {n}.vault_id AND folder = {n}.folder AND notes <= 0;"
    )


def _children(sign: str, n: str) -> str:
    """A visible note's tags, unresolved links and link targets counted in (+) or out (-)."""
    if sign == "+":
        return f"""
        INSERT INTO kept_tags SELECT {n}.vault_id, tag, 1 FROM note_tags WHERE rid = {n}.rid AND true
            ON CONFLICT DO UPDATE SET notes = notes + 1;
        INSERT INTO kept_unresolved SELECT {n}.vault_id, target_key, count(*) FROM links
            WHERE src_rid = {n}.rid AND {UNRESOLVED.format(l="")} GROUP BY target_key
            ON CONFLICT DO UPDATE SET links = links + excluded.links;
        INSERT INTO kept_backlinks SELECT DISTINCT dst_rid, 1 FROM links
            WHERE src_rid = {n}.rid AND dst_rid IS NOT NULL AND dst_rid != {n}.rid AND true
            ON CONFLICT DO UPDATE SET sources = sources + 1;"""
    # taken back the way they were given (an upsert of minus counts), then the rows left at 0 deleted through
    # the count indexes: an UPDATE ... WHERE key IN (the note's keys) per table cost a third of a note's delete
    return f"""
        INSERT INTO kept_tags SELECT {n}.vault_id, tag, -1 FROM note_tags WHERE rid = {n}.rid AND true
            ON CONFLICT DO UPDATE SET notes = notes - 1;
        DELETE FROM kept_tags WHERE vault_id = {n}.vault_id AND notes <= 0
            AND tag IN (SELECT tag FROM note_tags WHERE rid = {n}.rid);
        INSERT INTO kept_unresolved SELECT {n}.vault_id, target_key, -count(*) FROM links
            WHERE src_rid = {n}.rid AND {UNRESOLVED.format(l="")} GROUP BY target_key
            ON CONFLICT DO UPDATE SET links = links + excluded.links;
        DELETE FROM kept_unresolved WHERE links <= 0;
        INSERT INTO kept_backlinks SELECT DISTINCT dst_rid, -1 FROM links
            WHERE src_rid = {n}.rid AND dst_rid IS NOT NULL AND dst_rid != {n}.rid AND true
            ON CONFLICT DO UPDATE SET sources = sources - 1;
        DELETE FROM kept_backlinks WHERE sources <= 0;"""


def _unresolved(sign: str, link: str) -> str:
    vault = _VAULT_OF.format(r=f"{link}.src_rid")
    missing = UNRESOLVED.format(l=f"{link}.")
    if sign == "+":
        return (
            f"INSERT INTO kept_unresolved SELECT {vault}, {link}.target_key, 1 WHERE {missing} "
            "ON CONFLICT DO UPDATE SET links = links + 1;"
        )
    where = f"vault_id = {vault} AND target_key = {link}.target_key AND {missing}"
    return (
        f"UPDATE kept_unresolved SET links = links - 1 WHERE {where}; "
        f"DELETE FROM kept_unresolved WHERE {where} AND links <= 0;"
    )


def _backlink(sign: str, link: str) -> str:
    """A link's (source, target) pair counted in when it is the pair's only link now, out when no link
    of the pair is left (several links from one note to another count that note once)."""
    pair = f"SELECT 1 FROM links WHERE src_rid = {link}.src_rid AND dst_rid = {link}.dst_rid"
    real = f"{link}.dst_rid IS NOT NULL AND {link}.dst_rid != {link}.src_rid"
    if sign == "+":
        return (
            f"INSERT INTO kept_backlinks SELECT {link}.dst_rid, 1 WHERE {real} "
            f"AND (SELECT count(*) FROM ({pair} LIMIT 2)) = 1 ON CONFLICT DO UPDATE SET sources = sources + 1;"
        )
    return (
        f"UPDATE kept_backlinks SET sources = sources - 1 WHERE dst_rid = {link}.dst_rid AND {real} "
        f"AND NOT EXISTS ({pair}); "
        f"DELETE FROM kept_backlinks WHERE dst_rid = {link}.dst_rid AND sources <= 0;"
    )


REMOVING = "char(0)"  # the folder of a vault's marker row while ``removing`` deletes all its notes


def triggers() -> str:
    """The triggers that keep the four tables (m030)."""
    visible_new = _VISIBLE_SRC.format(r="new.rid")
    visible_old = _VISIBLE_SRC.format(r="old.rid")
    src_new = _VISIBLE_SRC.format(r="new.src_rid")
    src_old = _VISIBLE_SRC.format(r="old.src_rid")
    moved = "old.vault_id != new.vault_id OR (old.hidden_at IS NULL) != (new.hidden_at IS NULL)"
    return f"""
    CREATE TRIGGER kept_note_ai AFTER INSERT ON notes WHEN new.hidden_at IS NULL BEGIN
        {_folder("+", "new")} {_children("+", "new")}
    END;
    CREATE TRIGGER kept_note_bd BEFORE DELETE ON notes WHEN old.hidden_at IS NULL AND NOT EXISTS
        (SELECT 1 FROM kept_folders WHERE vault_id = old.vault_id AND folder = {REMOVING}) BEGIN
        {_folder("-", "old")} {_children("-", "old")}
    END;
    CREATE TRIGGER kept_note_folder_out AFTER UPDATE OF folder, vault_id, hidden_at ON notes
        WHEN old.hidden_at IS NULL AND (old.folder != new.folder OR {moved}) BEGIN
        {_folder("-", "old")}
    END;
    CREATE TRIGGER kept_note_folder_in AFTER UPDATE OF folder, vault_id, hidden_at ON notes
        WHEN new.hidden_at IS NULL AND (old.folder != new.folder OR {moved}) BEGIN
        {_folder("+", "new")}
    END;
    CREATE TRIGGER kept_note_out AFTER UPDATE OF vault_id, hidden_at ON notes
        WHEN old.hidden_at IS NULL AND ({moved}) BEGIN
        {_children("-", "old")}
    END;
    CREATE TRIGGER kept_note_in AFTER UPDATE OF vault_id, hidden_at ON notes
        WHEN new.hidden_at IS NULL AND ({moved}) BEGIN
        {_children("+", "new")}
    END;
    CREATE TRIGGER kept_tag_ai AFTER INSERT ON note_tags WHEN {visible_new} BEGIN
        INSERT INTO kept_tags SELECT vault_id, new.tag, 1 FROM notes WHERE rid = new.rid
            ON CONFLICT DO UPDATE SET notes = notes + 1;
    END;
    CREATE TRIGGER kept_tag_ad AFTER DELETE ON note_tags WHEN {visible_old} BEGIN
        UPDATE kept_tags SET notes = notes - 1 WHERE tag = old.tag AND vault_id = {_VAULT_OF.format(r="old.rid")};
        DELETE FROM kept_tags WHERE tag = old.tag AND vault_id = {_VAULT_OF.format(r="old.rid")} AND notes <= 0;
    END;
    CREATE TRIGGER kept_link_ai AFTER INSERT ON links WHEN {src_new} BEGIN
        {_unresolved("+", "new")} {_backlink("+", "new")}
    END;
    CREATE TRIGGER kept_link_ad AFTER DELETE ON links WHEN {src_old} BEGIN
        {_unresolved("-", "old")} {_backlink("-", "old")}
    END;
    CREATE TRIGGER kept_link_target AFTER UPDATE OF dst_rid, target_key, dst_file ON links
        WHEN (old.dst_rid IS NULL OR new.dst_rid IS NULL) AND (old.dst_rid IS NOT new.dst_rid
              OR old.target_key != new.target_key OR old.dst_file IS NOT new.dst_file) AND {src_new} BEGIN
        {_unresolved("-", "old")} {_unresolved("+", "new")}
    END;
    CREATE TRIGGER kept_link_dst AFTER UPDATE OF dst_rid ON links
        WHEN old.dst_rid IS NOT new.dst_rid AND {src_new} BEGIN
        {_backlink("-", "old")} {_backlink("+", "new")}
    END;
    """


# What the four tables must hold: the whole-index recount (``rebuild``; the tests compare with it)
RECOUNT = {
    "kept_folders": """SELECT vault_id, folder, count(*) FROM notes WHERE hidden_at IS NULL
                       GROUP BY vault_id, folder""",
    "kept_tags": """SELECT n.vault_id, t.tag, count(*) FROM note_tags t JOIN notes n ON n.rid = t.rid
                    WHERE n.hidden_at IS NULL GROUP BY n.vault_id, t.tag""",
    "kept_unresolved": """SELECT n.vault_id, l.target_key, count(*) FROM links l JOIN notes n ON n.rid = l.src_rid
                          WHERE l.dst_rid IS NULL AND l.dst_file IS NULL AND n.hidden_at IS NULL
                          GROUP BY n.vault_id, l.target_key""",
    "kept_backlinks": """SELECT l.dst_rid, count(DISTINCT l.src_rid) FROM links l JOIN notes n ON n.rid = l.src_rid
                         WHERE l.dst_rid IS NOT NULL AND l.dst_rid != l.src_rid AND n.hidden_at IS NULL
                         GROUP BY l.dst_rid""",
}


_VISIBLE = "temp.kept_visible"  # rid -> vault of the visible notes, from the (vault, path) index and the hidden one
_REBUILD = {
    "kept_folders": RECOUNT["kept_folders"],
    "kept_tags": f"""SELECT v.vault_id, t.tag, count(*) FROM note_tags t JOIN {_VISIBLE} v ON v.rid = t.rid
                    GROUP BY v.vault_id, t.tag""",
    "kept_unresolved": f"""SELECT v.vault_id, l.target_key, count(*) FROM links l JOIN {_VISIBLE} v ON v.rid = l.src_rid
                          WHERE l.dst_rid IS NULL AND l.dst_file IS NULL GROUP BY v.vault_id, l.target_key""",
    "kept_backlinks": f"""SELECT l.dst_rid, count(DISTINCT l.src_rid) FROM links l
                         WHERE l.dst_rid IS NOT NULL AND l.dst_rid != l.src_rid
                           AND l.src_rid IN (SELECT rid FROM {_VISIBLE}) GROUP BY l.dst_rid""",
}


def rebuild(conn: apsw.Connection) -> None:
    """Recount the four tables from the index (inside the caller's transaction): ``RECOUNT``, with each
    note's vault and visibility looked up in a small temporary table instead of the notes' wide rows."""
    conn.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {_VISIBLE.split('.')[1]} (rid INTEGER PRIMARY KEY, vault_id INTEGER)"
    )
    conn.execute(f"DELETE FROM {_VISIBLE}")
    conn.execute(
        f"INSERT INTO {_VISIBLE} SELECT rid, vault_id FROM notes "
        "WHERE rid NOT IN (SELECT rid FROM notes WHERE hidden_at IS NOT NULL)"
    )
    for table, select in _REBUILD.items():
        conn.execute(f"DELETE FROM {table}")
        conn.execute(f"INSERT INTO {table} {select}")
    conn.execute(f"DELETE FROM {_VISIBLE}")


@contextlib.contextmanager
def suspended(conn: apsw.Connection) -> Iterator[None]:
    """The triggers off on this connection while a whole vault is written, the tables recounted after
    (only inside one transaction: no other connection sees the counts while they are off). Prepared
    statements are compiled again when the setting changes, so none keeps or misses the trigger code."""
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    try:
        yield
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 1)
        rebuild(conn)
    finally:
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 1)


@contextlib.contextmanager
def deferred(conn: apsw.Connection) -> Iterator[None]:
    """The triggers off on this connection for one transaction, and the tables NOT recounted after: a new
    vault's first index commits its notes before their tags and links (``server.index.cold``), and the
    transaction that writes those recounts (``rebuild``). Until then the four tables hold nothing of that
    vault, and the vault says it is not complete (``vaults.index_state``)."""
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    try:
        yield
    finally:
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 1)


@contextlib.contextmanager
def removing(conn: apsw.Connection, vault_id: int) -> Iterator[None]:
    """Every note of vault ``vault_id`` deleted inside (in the caller's transaction): a marker row stops
    each note's trigger from taking back its counts one by one, and the tables are recounted after.
    (Triggers cannot be turned off here: deleting a note deletes its chunks, whose own triggers must run.)"""
    conn.execute(f"INSERT INTO kept_folders VALUES (?, {REMOVING}, 0)", (vault_id,))
    yield
    conn.execute(f"DELETE FROM kept_folders WHERE vault_id = ? AND folder = {REMOVING}", (vault_id,))
    rebuild(conn)


def m042_attachments_not_unresolved(conn: apsw.Connection) -> None:
    """A link to an attachment that exists (``dst_file``) no longer counts as unresolved: the triggers
    as ``triggers()`` now writes them, and the counts recounted (m030 on a new database writes these
    triggers already; dropping and writing them again is the same there)."""
    kept = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND substr(name, 1, 5) = 'kept_'"
    for (name,) in conn.execute(kept).fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(triggers())
    rebuild(conn)


def m030_kept_counts(conn: apsw.Connection) -> None:
    """Counts kept as the index changes (folders, tags, unresolved links, backlinks of visible notes), by
    triggers in the index's own transactions, counted once here from the existing index."""
    conn.execute(TABLES)
    conn.execute(triggers())
    rebuild(conn)
