"""``kms index --full`` re-parses every file and writes only what differs (issue 13, speed): its result
equals a fresh index, ids and hidden stamps kept, and the FTS index matches the notes exactly."""

from __future__ import annotations

import re
from pathlib import Path

import apsw
from support.sql import pairs, value
from support.vaults import write

from server.index.indexer import index_vault
from server.index.link_resolve import resolve_links
from server.index.notes import set_hidden
from server.index.search import search
from server.index.writer import FTS_DELETE, UPDATE_COLS, ChangedNotes, NewNotes
from server.store import kept_counts
from server.store.db import connect, rows, write_tx
from server.vault.registry import add_vault, get_vault

DERIVED = [c for c in UPDATE_COLS if c != "indexed_at"]


def fts_intact(conn: apsw.Connection) -> None:
    """FTS5's own check of the index against the notes table it indexes (raises if they differ)."""
    conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('integrity-check', 1)")


def state(conn: apsw.Connection) -> dict[str, tuple]:
    """Everything the index derives from each file, by path (ids and rids differ between databases)."""
    out = {}
    for row in rows(conn, f"SELECT rid, {', '.join(DERIVED)} FROM notes"):
        rid = row.pop("rid")
        children = tuple(
            tuple(tuple(r) for r in conn.execute(sql, (rid,)))
            for sql in (
                "SELECT tag FROM note_tags WHERE rid = ? ORDER BY tag",
                "SELECT key, kind FROM note_keys WHERE rid = ? ORDER BY key, kind",
                "SELECT l.ord, l.target, l.heading, l.alias, l.embed, l.line, d.path FROM links l "
                "LEFT JOIN notes d ON d.rid = l.dst_rid WHERE l.src_rid = ? ORDER BY l.ord",
                "SELECT ord, level, text, line FROM headings WHERE rid = ? ORDER BY ord",
            )
        )
        out[row["path"]] = (tuple(row.items()), children)
    return out


def fresh_state(root: Path, tmp_path: Path, name: str = "fresh") -> dict[str, tuple]:
    fresh = connect(tmp_path / f"{name}.db")
    index_vault(fresh, add_vault(fresh, root, "sample"))
    fts_intact(fresh)
    found = state(fresh)
    fresh.close()
    return found


def test_full_reindex_rewrites_what_is_stale_and_equals_a_fresh_index(
    indexed: apsw.Connection, vault_dir: Path, tmp_path: Path
) -> None:
    """An index an older parser wrote (a body, a title, headings, tags, a link, a frontmatter column
    that the files no longer give) is brought back to what the files say, and only those rows are
    rewritten."""
    ids = pairs(indexed, "SELECT path, id FROM notes")
    stale_rid, stale_path = indexed.execute("SELECT rid, path FROM notes ORDER BY path LIMIT 1").fetchall()[0]
    others = indexed.execute("SELECT rid FROM notes WHERE rid != ? ORDER BY rid LIMIT 3", (stale_rid,)).fetchall()
    with write_tx(indexed):  # the FTS entry kept in step by hand, as the writer does
        indexed.execute(FTS_DELETE, (stale_rid,))
        indexed.execute(
            "UPDATE notes SET title = 'Stale', body = 'quokka words', indexed_at = 1.0 WHERE rid = ?", (stale_rid,)
        )
        indexed.execute(
            "INSERT INTO notes_fts(rowid, title, body, tags, props, cjk) "
            "SELECT rid, title, body, tags, props, cjk FROM notes_fts_source WHERE rid = ?",
            (stale_rid,),
        )
        indexed.execute("DELETE FROM headings WHERE rid = ?", others[0])
        indexed.execute("DELETE FROM note_tags WHERE rid = ?", others[1])
        indexed.execute("INSERT INTO note_tags VALUES (?, 'stale-tag')", others[1])
        indexed.execute("UPDATE links SET target = 'Nowhere', target_key = 'nowhere', dst_rid = NULL")
        indexed.execute("UPDATE notes SET frontmatter = '{}', indexed_at = 1.0 WHERE rid = ?", others[2])
    fts_intact(indexed)
    assert search(indexed, "quokka")["hits"]
    untouched = pairs(indexed, "SELECT rid, indexed_at FROM notes WHERE indexed_at != 1.0")

    report = index_vault(indexed, get_vault(indexed, "sample"), full=True)
    assert report.unchanged == len(ids) and report.changed == 0 and not report.errors
    assert pairs(indexed, "SELECT path, id FROM notes") == ids
    fts_intact(indexed)
    assert search(indexed, "quokka")["hits"] == []
    assert state(indexed) == fresh_state(vault_dir, tmp_path)
    # the two stale rows were written again; the rest were not (indexed_at: when a row was last written)
    assert indexed.execute("SELECT count(*) FROM notes WHERE indexed_at = 1.0").fetchall() == [(0,)]
    assert (
        pairs(
            indexed,
            f"SELECT rid, indexed_at FROM notes WHERE rid IN ({','.join('?' * len(untouched))})",
            tuple(untouched),
        )
        == untouched
    )
    assert stale_path in state(indexed)


def test_many_changed_files_are_written_in_batches_keeping_ids_and_stamps(
    conn: apsw.Connection, tmp_path: Path
) -> None:
    """More changed notes than one batch holds (``ChangedNotes.SIZE``), renames among them: every
    delete of a batch before its inserts, the FTS index still exact, the result a fresh index's."""
    root = tmp_path / "v"
    count = ChangedNotes.SIZE + 44
    for i in range(count):
        write(root / f"f{i % 7}" / f"note {i}.md", f"# Note {i}\n\nbody of note {i} #t{i % 5} links [[note {i + 1}]]\n")
    vault = add_vault(conn, root, "sample")
    index_vault(conn, vault)
    ids = pairs(conn, "SELECT path, id FROM notes")
    secret = ids["f3/note 3.md"]
    set_hidden(conn, secret, True)
    hidden_at = conn.execute("SELECT hidden_at FROM notes WHERE id = ?", (secret,)).fetchall()[0][0]

    for i in (i for i in range(count) if i != 2):
        write(root / f"f{i % 7}" / f"note {i}.md", f"# Note {i}\n\nnew text {i} #t{i % 3} links [[note {i - 1}]]\n")
    (root / "f1" / "note 1.md").rename(root / "f1" / "moved.md")  # an edited rename: a new note
    (root / "f2" / "note 2.md").rename(root / "f2" / "renamed.md")  # same bytes: the same note
    report = index_vault(conn, vault)
    assert (report.updated, report.renamed, report.added, report.deleted) == (count - 2, 1, 1, 1)
    fts_intact(conn)
    assert conn.execute("SELECT id FROM notes WHERE path = 'f2/renamed.md'").fetchall() == [(ids["f2/note 2.md"],)]
    assert conn.execute("SELECT hidden_at FROM notes WHERE id = ?", (secret,)).fetchall() == [(hidden_at,)]
    assert search(conn, "new text 4")["hits"] and all(h["noteId"] != secret for h in search(conn, "new text 3")["hits"])
    assert state(conn) == fresh_state(root, tmp_path, "after-edits")

    write(root / "f5" / "note 299.md", "edited during the full reindex #late\n")  # past the first chunk
    (root / "f4" / "note 4.md").rename(root / "f4" / "again.md")  # a rename the full reindex finds
    report = index_vault(conn, vault, full=True)
    assert (report.updated, report.renamed, report.unchanged) == (1, 1, count - 2)
    assert conn.execute("SELECT id FROM notes WHERE path = 'f4/again.md'").fetchall() == [(ids["f4/note 4.md"],)]
    fts_intact(conn)
    assert conn.execute("SELECT hidden_at FROM notes WHERE id = ?", (secret,)).fetchall() == [(hidden_at,)]
    assert state(conn) == fresh_state(root, tmp_path, "after-full")


def test_resolving_every_link_again_rewrites_only_the_links_whose_target_changes(
    indexed: apsw.Connection, vault_dir: Path, tmp_path: Path
) -> None:
    """A full reindex resolves every link again (``resolve_links(conn, None, None)``): a link resolved to
    the wrong note or to a file that is not its target is set right, and only those rows are written."""
    links = indexed.execute(
        "SELECT src_rid, ord, dst_rid FROM links WHERE dst_rid IS NOT NULL ORDER BY src_rid, ord LIMIT 2"
    ).fetchall()
    assert len(links) == 2 and value(indexed, "SELECT count(*) FROM links") > 10
    (src, n, dst), (src2, n2, _dst2) = links
    wrong = indexed.execute("SELECT rid FROM notes WHERE rid != ? LIMIT 1", (dst,)).fetchall()[0][0]
    with write_tx(indexed):
        indexed.execute("UPDATE links SET dst_rid = ? WHERE src_rid = ? AND ord = ?", (wrong, src, n))
        indexed.execute("UPDATE links SET dst_file = 'gone.png' WHERE src_rid = ? AND ord = ?", (src2, n2))
    before = indexed.total_changes()
    with write_tx(indexed), kept_counts.suspended(indexed):  # rows written by the link pass only, not the kept
        resolve_links(indexed, None, None)  # counts' triggers (recounted once at the end, not counted here)
        assert indexed.total_changes() - before == 2
    assert indexed.execute("SELECT dst_rid FROM links WHERE src_rid = ? AND ord = ?", (src, n)).fetchall() == [(dst,)]
    assert indexed.execute("SELECT dst_file FROM links WHERE src_rid = ? AND ord = ?", (src2, n2)).fetchall() == [
        (None,)
    ]
    assert state(indexed) == fresh_state(vault_dir, tmp_path)


def test_a_cold_index_gives_every_note_its_own_public_id(conn: apsw.Connection, tmp_path: Path) -> None:
    """New notes go in by batches (``NewNotes``): each id is ``n`` and 12 hex digits, none repeats,
    across more than one batch."""
    root = tmp_path / "v"
    for i in range(NewNotes.SIZE + 10):
        write(root / f"n{i}.md", f"note {i}\n")
    index_vault(conn, add_vault(conn, root, "ids"))
    ids = [r[0] for r in conn.execute("SELECT id FROM notes")]
    assert len(ids) == len(set(ids)) == NewNotes.SIZE + 10
    assert all(re.fullmatch(r"n[0-9a-f]{12}", i) for i in ids)
