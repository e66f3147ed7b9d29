"""Writing a note's rows: the notes row and its FTS entry, tags, keys, links and headings.

The FTS table is kept in step here by direct statements (a trigger would run per row and slow the
bulk inserts of a cold index), and new notes go in by batches (``NewNotes``). ``notes_fts`` is an
external-content FTS5 table over the view ``notes_fts_source`` (m011), whose title is
``coalesce(search_title, title)``: a frontmatter title, the file stem behind it and a Dendron ``desc``
are searched at the title's weight (the table's rank is ``bm25(10, 1, 5)``: title, body, tags).
``server.index.indexer`` decides what to write; where the links land is ``server.index.link_resolve``.
"""

from __future__ import annotations

import operator

import apsw

from server.index.privacy import HIDDEN_AT_SQL
from server.index.records import FileRecord
from server.store.db import scalar
from server.store.note_ids import id_scope, new_note_id


def free_note_ids(conn: apsw.Connection, scope: str, wanted: list[tuple[str, str | None]]) -> list[str]:
    """``new_note_id`` for each (path, carried id), none taken in the index nor twice in the list."""
    ids = [new_note_id(scope, path, carried) for path, carried in wanted]
    taken: set[str] = set()
    for at in range(0, len(ids), 500):
        chunk = ids[at : at + 500]
        taken.update(
            r[0] for r in conn.execute(f"SELECT id FROM notes WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        )
    for i, (path, carried) in enumerate(wanted):
        attempt = 0
        while ids[i] in taken:  # rare: then each further try is looked up alone
            attempt += 1
            ids[i] = new_note_id(scope, path, carried, attempt)
            if conn.execute("SELECT 1 FROM notes WHERE id = ?", (ids[i],)).fetchone():
                taken.add(ids[i])
        taken.add(ids[i])
    return ids


def vault_id_scope(conn: apsw.Connection, vault_id: int) -> str:
    """What a vault's new note ids are made from (``note_ids.id_scope``: its folder's name)."""
    return id_scope(str(scalar(conn, "SELECT root FROM vaults WHERE id = ?", (vault_id,))))


def children_rows(rec: FileRecord, rid: int, vault_id: int) -> tuple[list, list, list, list, list]:
    return (
        [(rid, t) for t in rec.tags],
        [(k, vault_id, rid, kind) for k, kind in rec.keys],
        [(rid, *ln) for ln in rec.links],
        [(rid, *h) for h in rec.headings],
        [(rid, *p) for p in rec.props],
    )


_LINK_COLS = (
    "src_rid, ord, target, target_key, heading, block, alias, embed, in_frontmatter, line, alt_key, target_vault"
)


def insert_children(
    conn: apsw.Connection, tags: list, keys: list, links: list, heads: list, props: list | None = None
) -> None:
    conn.executemany("INSERT OR IGNORE INTO note_tags VALUES (?, ?)", tags)
    conn.executemany("INSERT OR IGNORE INTO note_keys VALUES (?, ?, ?, ?)", keys)
    conn.executemany(f"INSERT INTO links({_LINK_COLS}) VALUES ({', '.join('?' * _LINK_COLS.count(','))}, ?)", links)
    conn.executemany("INSERT INTO headings VALUES (?, ?, ?, ?, ?)", heads)
    if props:
        conn.executemany("INSERT OR IGNORE INTO note_props(rid, key, ord, value, num) VALUES (?, ?, ?, ?, ?)", props)


def insert_resolved_links(conn: apsw.Connection, rows: list[tuple]) -> None:
    """Links whose targets are known already (``server.index.new_links``): each row is ``(src_rid, ...the
    record's link columns..., dst_rid, dst_file)``."""
    conn.executemany(
        f"INSERT INTO links({_LINK_COLS}, dst_rid, dst_file) VALUES ({', '.join('?' * (_LINK_COLS.count(',') + 3))})",
        rows,
    )


def new_children(done: list[tuple[int, FileRecord]], vault_id: int) -> tuple[list, list, list, list, list]:
    """The tags, keys, links, headings and properties rows of new notes ``(rid, record)``."""
    tags: list = []
    keys: list = []
    links: list = []
    heads: list = []
    props: list = []
    for rid, rec in done:
        tags += [(rid, t) for t in rec.tags]
        keys += [(k, vault_id, rid, kind) for k, kind in rec.keys]
        links += [(rid, *ln) for ln in rec.links]
        heads += [(rid, *h) for h in rec.headings]
        props += [(rid, *p) for p in rec.props]
    return tags, keys, links, heads, props


# Each child table: its note column and the columns ``children_rows`` fills, in order.
_CHILD_TABLES = (
    ("note_tags", "rid", "rid, tag"),
    ("note_keys", "rid", "key, vault_id, rid, kind"),
    ("links", "src_rid", _LINK_COLS),
    ("headings", "rid", "rid, ord, level, text, line"),
    ("note_props", "rid", "rid, key, ord, value, num"),
)


def write_children(
    conn: apsw.Connection, rid: int, vault_id: int, rec: FileRecord, stored: list[list[tuple]] | None = None
) -> tuple[set[str], bool]:
    """Bring the note's tags, keys, links and headings in line with ``rec``, rewriting only the tables
    whose rows changed (an edit to a note's text usually changes none: far fewer pages to commit).
    ``stored``: the note's rows per table as they are (``StoredRows``), else they are read here.

    Returns the keys the note gained or lost (links naming them must be re-resolved) and whether its
    own links changed (they must be resolved again: rewritten rows start unresolved)."""
    new_rows = children_rows(rec, rid, vault_id)
    changed: list[bool] = []
    old_keys: set[tuple] = set()
    for i, ((table, col, cols), rows) in enumerate(zip(_CHILD_TABLES, new_rows, strict=True)):
        old = (
            stored[i]
            if stored is not None
            else [tuple(r) for r in conn.execute(f"SELECT {cols} FROM {table} WHERE {col} = ? ORDER BY {cols}", (rid,))]
        )
        if table == "note_keys":
            old_keys = set(old)
        same = old == sorted(set(rows) if table in ("note_tags", "note_keys", "note_props") else rows)
        if not same:
            conn.execute(f"DELETE FROM {table} WHERE {col} = ?", (rid,))
        changed.append(not same)
    insert_children(conn, *(rows if c else [] for rows, c in zip(new_rows, changed, strict=True)))
    return {k[0] for k in old_keys ^ set(new_rows[1])}, changed[2]


UPDATE_COLS = (
    "path, folder, title, search_title, body, tags, aliases, frontmatter, fm_error, summary_state, summary_hash, "
    "summary_text, content_hash, size_bytes, token_estimate, mtime_ns, updated_at, indexed_at, link_to, hidden_rule, "
    "search_props, search_cjk"
).split(", ")
update_values = operator.itemgetter(*UPDATE_COLS)  # a values dict -> its UPDATE_COLS, in order
UPDATE_SQL = (
    "UPDATE notes SET "
    + ", ".join(f"{c} = :{c}" for c in UPDATE_COLS)
    + f", created_at = coalesce(:created, created_at), hidden_at = {HIDDEN_AT_SQL} WHERE rid = :rid"
)
INSERT_SQL = (
    "INSERT INTO notes(id, vault_id, created_at, hidden_at, "
    + ", ".join(UPDATE_COLS)
    + ") VALUES (:id, :vault_id, :created_at, :hidden_at, "
    + ", ".join(f":{c}" for c in UPDATE_COLS)
    + ")"
)


FTS_INSERT = "INSERT INTO notes_fts(rowid, title, body, tags, props, cjk) VALUES (?, ?, ?, ?, ?, ?)"
FTS_DELETE = (
    "INSERT INTO notes_fts(notes_fts, rowid, title, body, tags, props, cjk) "
    "SELECT 'delete', rid, title, body, tags, props, cjk FROM notes_fts_source WHERE rid = ?"
)


def fts_entry(rid: int, values: dict) -> tuple:
    """``FTS_INSERT``'s arguments for a note's values (what ``FTS_DELETE`` reads back from its row: the
    title column holds the search title when there is one, see ``notes_fts_source``)."""
    title = values.get("search_title") or values["title"]
    return rid, title, values["body"], values["tags"], values["search_props"], values["search_cjk"]


def update_note(conn: apsw.Connection, rid: int, values: dict) -> None:
    conn.execute(FTS_DELETE, (rid,))
    conn.execute(UPDATE_SQL, {**values, "rid": rid})
    conn.execute(FTS_INSERT, fts_entry(rid, values))


def insert_note(conn: apsw.Connection, vault_id: int, values: dict, now: float) -> int:
    """One new note (a new id, created ``now``); returns its rid."""
    values = {
        **values,
        "id": free_note_ids(conn, vault_id_scope(conn, vault_id), [(values["path"], values.get("fm_id"))])[0],
        "vault_id": vault_id,
        "created_at": values.get("created") or values.get("born") or now,
        "hidden_at": now if values["hidden_rule"] else None,
    }
    conn.execute(INSERT_SQL, values)  # not RETURNING: an open RETURNING cursor halves insert speed
    rid = conn.last_insert_rowid()
    conn.execute(FTS_INSERT, fts_entry(rid, values))
    return rid


class NewNotes:
    """New notes are inserted in batches: one ``executemany`` per table instead of a handful of
    statements per note is what keeps a cold index close to a bare FTS5 load. ``children`` False: only
    the notes rows and their FTS rows (a new vault's first phase, ``server.index.cold``)."""

    SIZE = 256
    _COLS = ("rid", "id", "vault_id", "created_at", "hidden_at", *UPDATE_COLS)
    _SQL = f"INSERT INTO notes({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})"

    def __init__(self, conn: apsw.Connection, vault_id: int, *, children: bool = True) -> None:
        self.conn = conn
        self.vault_id = vault_id
        self.scope = ""  # its id scope, looked up at the first flush (new ids are made from it)
        self.children = children
        self.pending: list[tuple[FileRecord, dict]] = []

    def add(self, rec: FileRecord, values: dict) -> list[tuple[int, FileRecord]]:
        self.pending.append((rec, values))
        return self.flush() if len(self.pending) >= self.SIZE else []

    def flush(self) -> list[tuple[int, FileRecord]]:
        """Insert what is pending (we hold the write lock, so max(rid) is ours to extend)."""
        if not self.pending:
            return []
        conn, vid = self.conn, self.vault_id
        first = (next(conn.execute("SELECT max(rid) FROM notes"))[0] or 0) + 1
        pending, self.pending = self.pending, []
        self.scope = self.scope or vault_id_scope(conn, vid)
        ids = free_note_ids(conn, self.scope, [(v["path"], v.get("fm_id")) for _rec, v in pending])
        conn.executemany(
            self._SQL,
            [
                (
                    first + i,
                    ids[i],
                    vid,
                    v.get("created") or v.get("born") or v["indexed_at"],
                    v["indexed_at"] if v["hidden_rule"] else None,
                    *update_values(v),
                )
                for i, (_rec, v) in enumerate(pending)
            ],
        )
        conn.executemany(FTS_INSERT, [fts_entry(first + i, v) for i, (_rec, v) in enumerate(pending)])
        done = [(first + i, rec) for i, (rec, _v) in enumerate(pending)]
        if self.children:
            insert_children(conn, *new_children(done, vid))
        return done


_COMPARED = tuple(c for c in UPDATE_COLS if c != "indexed_at")  # what a file decides in a notes row
_STORED = f"hidden_stamp, hidden_at, created_at, {', '.join(_COMPARED)}"  # what ChangedNotes compares


class ChangedNotes:
    """Known notes whose rows change, written in batches by ``flush``, and rows that would not change
    not written at all.

    Every FTS delete of a batch goes before any insert: FTS5 flushes its term buffer to a new segment
    whenever a delete and an insert alternate, so one note at a time made one tiny segment per note
    (and an ``optimize`` to merge them). A row that already holds what
    the file says (``kms index --full`` re-parsing an unchanged file, the usual case) is left as it is,
    FTS entry included: ``indexed_at`` is when the row was last written from its file. A row that
    changes gets its FTS entry replaced the way ``update_note`` replaces it."""

    SIZE = 256
    _SELECT = f"SELECT {_STORED} FROM notes WHERE rid = ?"  # see StoredRows
    _compared = operator.itemgetter(*_COMPARED)

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.pending: list[tuple[int, dict]] = []  # (rid, values)
        self.fts_rewritten = 0

    def add(self, rid: int, values: dict, stored: tuple | None = None) -> bool:
        """Queue note ``rid`` for ``values`` (``values`` must not change until ``flush``); False when its
        row holds them already, hidden flag included, so there is nothing to write. ``stored``: its row
        as ``StoredRows`` read it, else it is read here."""
        stamp, hidden_at, created_at, *old = stored or next(self.conn.execute(self._SELECT, (rid,)))
        rule = values["hidden_rule"]
        flag_ok = (hidden_at == stamp) if stamp is not None else (hidden_at is None) == (rule is None)
        created = values.get("created")  # a creation date the file gives, when the parser reads one
        if flag_ok and created in (None, created_at) and tuple(old) == self._compared(values):
            return False
        self.queue(rid, values)
        return True

    def queue(self, rid: int, values: dict) -> None:
        """Queue note ``rid`` for ``values`` without comparing: its file's bytes changed (a new hash)."""
        self.pending.append((rid, values))
        if len(self.pending) >= self.SIZE:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        pending, self.pending = sorted(self.pending, key=operator.itemgetter(0)), []
        self.conn.executemany(FTS_DELETE, [(rid,) for rid, _v in pending])  # reads the rows as they still are
        self.conn.executemany(UPDATE_SQL, [{**v, "rid": rid} for rid, v in pending])
        self.conn.executemany(FTS_INSERT, [fts_entry(rid, v) for rid, v in pending])
        self.fts_rewritten += len(pending)


class StoredRows:
    """The rows of the notes a full reindex compares with their files, read ``CHUNK`` notes at a time
    in the order their files come: a few queries per chunk instead of five point queries per note.
    Each note is asked for once, before it is written."""

    CHUNK = 256

    def __init__(self, conn: apsw.Connection, rids: list[int], *, notes: bool = True) -> None:
        """``notes`` False: only the children rows are read (the notes' own rows are not compared)."""
        self.conn = conn
        self.with_notes = notes
        self.rids = rids
        self.at = {rid: i for i, rid in enumerate(rids)}
        self.notes: dict[int, tuple] = {}
        self.children: dict[int, list[list[tuple]]] = {}

    def _load(self, rid: int) -> None:
        chunk = self.rids[self.at[rid] : self.at[rid] + self.CHUNK]
        marks = ",".join("?" * len(chunk))
        self.notes = (
            {
                r[0]: tuple(r[1:])
                for r in self.conn.execute(f"SELECT rid, {_STORED} FROM notes WHERE rid IN ({marks})", chunk)
            }
            if self.with_notes
            else {}
        )
        self.children = {r: [[] for _ in _CHILD_TABLES] for r in chunk}
        for i, (table, col, cols) in enumerate(_CHILD_TABLES):  # in each note's own order (write_children's)
            for row in self.conn.execute(
                f"SELECT {col}, {cols} FROM {table} WHERE {col} IN ({marks}) ORDER BY {cols}", chunk
            ):
                self.children[row[0]][i].append(tuple(row[1:]))

    def note(self, rid: int) -> tuple | None:
        """The note's ``ChangedNotes`` row, None for a note not in the list (a rename's)."""
        if rid not in self.notes and rid in self.at:
            self._load(rid)
        return self.notes.get(rid)

    def children_of(self, rid: int) -> list[list[tuple]] | None:
        if rid not in self.children and rid in self.at:
            self._load(rid)
        return self.children.get(rid)


def delete_note_row(conn: apsw.Connection, rid: int) -> None:
    """The note's row and its FTS entry (its tags, keys, links and headings go by cascade)."""
    conn.execute(FTS_DELETE, (rid,))
    conn.execute("DELETE FROM notes WHERE rid = ?", (rid,))
