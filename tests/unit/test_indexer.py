"""The indexer on real files: sample vault, incremental changes, renames, safety (issue 2)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.sql import pairs
from support.vaults import note_id, write

from server.errors import KmsError
from server.index import records
from server.index.incremental import reindex_file
from server.index.indexer import index_all, index_vault, remove_vault
from server.index.notes import resolve_note, set_hidden
from server.index.search import search
from server.index.watcher import apply_changes
from server.store.db import connect, rows, scalar
from server.vault.registry import add_vault, get_vault, list_vaults


def md_files(root: Path) -> list[str]:
    """What the indexer should index: *.md outside dot-folders (no symlinks in the sample vault)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for f in filenames:
            if f.endswith(".md") and not f.startswith("."):
                out.append(Path(dirpath, f).relative_to(root).as_posix())
    return sorted(out)


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry under root (dot-folders and non-Markdown too): content hash, mtime, mode."""
    state: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            rel = p.relative_to(root).as_posix()
            if stat.S_ISREG(st.st_mode):
                state[rel] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_mode)
            else:
                state[rel] = (None, st.st_mtime_ns, st.st_mode)
    return state


def note_row(conn: apsw.Connection, path: str) -> dict[str, Any] | None:
    found = rows(conn, "SELECT * FROM notes WHERE path = ?", (path,))
    return found[0] if found else None


def note(conn: apsw.Connection, path: str) -> dict[str, Any]:
    """The row of a note that must be indexed."""
    row = note_row(conn, path)
    assert row is not None, f"{path} is not indexed"
    return row


def links_from(conn: apsw.Connection, path: str) -> list[dict]:
    return rows(
        conn,
        """SELECT l.target, l.dst_rid, d.path AS dst_path FROM links l JOIN notes s ON s.rid = l.src_rid
           LEFT JOIN notes d ON d.rid = l.dst_rid WHERE s.path = ? ORDER BY l.ord""",
        (path,),
    )


def snapshot(conn: apsw.Connection) -> dict[str, list]:
    return {
        t: list(conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2"))
        for t in ("notes", "note_tags", "note_keys", "links", "headings")
    }


@pytest.fixture
def vault(conn: apsw.Connection, tmp_path: Path):
    root = tmp_path / "v"
    root.mkdir()
    return add_vault(conn, root, "v")


# --- the sample vault ------------------------------------------------------------------------------


def test_sample_vault_indexes_every_markdown_file(conn: apsw.Connection, vault_dir: Path) -> None:
    v = add_vault(conn, vault_dir, "sample")
    report = index_vault(conn, v)
    expected = md_files(vault_dir)
    assert report.errors == []
    assert report.scanned == report.added == len(expected)
    assert [r[0] for r in conn.execute("SELECT path FROM notes ORDER BY path")] == expected
    for r in rows(conn, "SELECT id, path, title, folder, content_hash, size_bytes FROM notes"):
        assert r["id"].startswith("n") and len(r["id"]) == 13 and int(r["id"][1:], 16) >= 0
        assert r["title"] == r["path"].rsplit("/", 1)[-1][:-3]
        assert r["folder"] == (r["path"].rsplit("/", 1)[0] if "/" in r["path"] else "")
        data = (vault_dir / r["path"]).read_bytes()
        assert r["content_hash"] == hashlib.sha256(data).hexdigest()
        assert r["size_bytes"] == len(data)
    # the FTS index holds every note
    assert scalar(conn, "SELECT count(*) FROM notes_fts") == len(expected)
    # tags are stored lower-case without '#'
    assert not scalar(conn, "SELECT count(*) FROM note_tags WHERE tag != lower(tag) OR tag LIKE '#%'")
    # the template with {{placeholders}} is flagged, and still indexed with its body
    daily = note(conn, "templates/Daily template.md")
    assert daily["fm_error"].startswith("invalid YAML") and daily["frontmatter"] is None
    assert report.flagged >= 1
    # aliases resolve links: [[PoSD]] is "A Philosophy of Software Design", [[k8s]] is Kubernetes
    dst = {r["target"]: r["dst_path"] for p in md_files(vault_dir) for r in links_from(conn, p)}
    assert dst["PoSD"] == "reference/A Philosophy of Software Design.md"
    assert dst["k8s"] == "reference/Kubernetes.md"
    assert dst["journal/2026-11-01"] == "journal/2026-11-01.md"
    # a CRLF note is parsed (its tags from frontmatter) and keeps its CRLF body
    win = note(conn, "inbox/Windows clipboard.md")
    assert "windows" in win["tags"].split() and "\r\n" in win["body"]
    # the note with a summary block: its body does not carry the block
    design = note(conn, "projects/kms design.md")
    assert design["summary_state"] in ("fresh", "stale") and design["summary_text"]
    assert "kms:summary" not in design["body"]
    # the unicode title is searchable, with or without the accent
    assert search(conn, "cafe")["hits"][0]["title"] == "Café ☕ notes"


def test_reindex_without_changes_touches_nothing(indexed: apsw.Connection, vault_dir: Path) -> None:
    before = snapshot(indexed)
    files_before = tree_state(vault_dir)
    v = get_vault(indexed, "sample")
    report = index_vault(indexed, v)
    assert report.changed == 0 and report.unchanged == report.scanned == len(md_files(vault_dir))
    assert snapshot(indexed) == before
    assert tree_state(vault_dir) == files_before


def test_full_reindex_keeps_ids_and_reparses(indexed: apsw.Connection) -> None:
    before = pairs(indexed, "SELECT path, id FROM notes")
    indexed_at = scalar(indexed, "SELECT max(indexed_at) FROM notes")
    report = index_vault(indexed, get_vault(indexed, "sample"), full=True)
    # every file re-parsed, none changed: the report says nothing changed (issue 17)
    assert report.unchanged == len(before) and report.updated == report.added == report.deleted == 0
    assert pairs(indexed, "SELECT path, id FROM notes") == before
    # a row that already holds what its file says is not rewritten (test_full_reindex.py: what is stale is)
    assert scalar(indexed, "SELECT max(indexed_at) FROM notes") == indexed_at
    assert scalar(indexed, "SELECT count(*) FROM notes_fts") == len(before)


def test_touch_without_content_change_is_not_reparsed(indexed: apsw.Connection, vault_dir: Path) -> None:
    path = vault_dir / "reference" / "Git tips.md"
    row = note(indexed, "reference/Git tips.md")
    os.utime(path, ns=(row["mtime_ns"] + 5_000_000_000, row["mtime_ns"] + 5_000_000_000))
    report = index_vault(indexed, get_vault(indexed, "sample"))
    assert report.changed == 0
    after = note(indexed, "reference/Git tips.md")
    assert after["mtime_ns"] == row["mtime_ns"] + 5_000_000_000
    assert after["indexed_at"] == row["indexed_at"] and after["id"] == row["id"]


# --- incremental changes -----------------------------------------------------------------------------


def test_incremental_add_edit_delete(conn: apsw.Connection, vault) -> None:
    write(vault.root / "a.md", "# A\n\nalpha words #one [[B]]\n")
    write(vault.root / "b.md", "# B\n\nbeta words\n")
    r = index_vault(conn, vault)
    assert (r.added, r.updated, r.deleted) == (2, 0, 0)
    a_id = note(conn, "a.md")["id"]

    write(vault.root / "c.md", "gamma #three")
    write(vault.root / "a.md", "# A\n\nalpha changed #two [[C]]\n")
    (vault.root / "b.md").unlink()
    r = index_vault(conn, vault)
    assert (r.added, r.updated, r.deleted, r.renamed) == (1, 1, 1, 0)
    a = note(conn, "a.md")
    assert a["id"] == a_id and a["tags"] == "two" and "changed" in a["body"]
    assert note_row(conn, "b.md") is None
    assert [(ln["target"], ln["dst_path"]) for ln in links_from(conn, "a.md")] == [("C", "c.md")]
    assert [r[0] for r in conn.execute("SELECT tag FROM note_tags ORDER BY tag")] == ["three", "two"]
    assert [h["noteId"] for h in search(conn, "changed")["hits"]] == [a_id]
    assert search(conn, "beta")["hits"] == []
    assert search(conn, "alpha words")["hits"] == [] or search(conn, "alpha words")["relaxed"]


def test_rename_keeps_id_and_hidden_survives_full_and_rename(conn: apsw.Connection, vault) -> None:
    write(vault.root / "private" / "Secret plans.md", "# Secret\n\nthe zebra protocol #secret\n")
    write(vault.root / "linker.md", "see [[Secret plans]] and [[private/Secret plans]]\n")
    index_vault(conn, vault)
    sid = note(conn, "private/Secret plans.md")["id"]
    set_hidden(conn, sid, True)
    hidden_at = note(conn, "private/Secret plans.md")["hidden_at"]
    assert hidden_at and search(conn, "zebra")["hits"] == []

    r = index_vault(conn, vault, full=True)
    assert r.unchanged == 2 and r.changed == 0
    assert note(conn, "private/Secret plans.md")["hidden_at"] == hidden_at

    (vault.root / "archive").mkdir()
    os.rename(vault.root / "private" / "Secret plans.md", vault.root / "archive" / "Old plans.md")
    r = index_vault(conn, vault)
    assert (r.renamed, r.added, r.deleted) == (1, 0, 0)
    moved = note(conn, "archive/Old plans.md")
    assert moved["id"] == sid and moved["hidden_at"] == hidden_at
    assert moved["title"] == "Old plans" and moved["folder"] == "archive"
    assert note_row(conn, "private/Secret plans.md") is None
    assert search(conn, "zebra")["hits"] == []
    # the links to the old name no longer resolve to it
    assert all(ln["dst_rid"] is None for ln in links_from(conn, "linker.md"))
    with pytest.raises(KmsError) as exc:
        resolve_note(conn, "Old plans")
    assert exc.value.kind == "not-found"
    assert resolve_note(conn, "Old plans", include_hidden=True)["id"] == sid


def test_watcher_rename_keeps_id_and_hidden(conn: apsw.Connection, vault) -> None:
    """A rename seen by a running server's watcher must not turn a hidden note into a new visible one."""
    write(vault.root / "Secret.md", "the walrus memo\n")
    index_vault(conn, vault)
    sid = note_id(conn, "Secret")
    set_hidden(conn, sid, True)
    old, new = vault.root / "Secret.md", vault.root / "Renamed.md"
    os.rename(old, new)
    assert apply_changes(conn, [vault], {str(old), str(new)}) >= 1
    row = note(conn, "Renamed.md")
    assert row["id"] == sid and row["hidden_at"] is not None
    assert note_row(conn, "Secret.md") is None
    assert search(conn, "walrus")["hits"] == []


def test_watcher_folder_rename_moves_its_notes(conn: apsw.Connection, vault) -> None:
    write(vault.root / "old" / "one.md", "first note")
    write(vault.root / "old" / "two.md", "second note")
    index_vault(conn, vault)
    ids = pairs(conn, "SELECT path, id FROM notes")
    os.rename(vault.root / "old", vault.root / "new")
    apply_changes(conn, [vault], {str(vault.root / "old"), str(vault.root / "new")})
    assert pairs(conn, "SELECT path, id FROM notes") == {
        "new/one.md": ids["old/one.md"],
        "new/two.md": ids["old/two.md"],
    }


def test_watcher_edit_and_delete_of_single_files(conn: apsw.Connection, vault) -> None:
    write(vault.root / "n.md", "original words")
    index_vault(conn, vault)
    nid = note_id(conn, "n")
    write(vault.root / "n.md", "edited words")
    write(vault.root / ".obsidian" / "workspace.json", "{}")
    write(vault.root / "notes.txt", "not markdown")
    assert (
        apply_changes(
            conn,
            [vault],
            {str(vault.root / "n.md"), str(vault.root / ".obsidian" / "workspace.json"), str(vault.root / "notes.txt")},
        )
        == 2
    )  # the note, and notes.txt as a file
    assert scalar(conn, "SELECT count(*) FROM attachments WHERE path = 'notes.txt'") >= 1
    assert note(conn, "n.md")["body"] == "edited words" and note(conn, "n.md")["id"] == nid
    (vault.root / "n.md").unlink()
    apply_changes(conn, [vault], {str(vault.root / "n.md")})
    assert scalar(conn, "SELECT count(*) FROM notes") == 0


def test_watcher_resolves_links_to_an_attachment_that_appears(conn: apsw.Connection, vault) -> None:
    """A pasted image: the link that named a missing file resolves at the watcher's event, not at the next
    ``kms index``; its removal is a scan (it un-resolves again)."""
    write(vault.root / "n.md", "see ![[pic.png]] and [[img/chart.svg]]\n")
    index_vault(conn, vault)
    resolved = "SELECT target, dst_file FROM links ORDER BY ord"
    assert conn.execute(resolved).fetchall() == [("pic.png", None), ("img/chart.svg", None)]
    write(vault.root / "attachments" / "pic.png", "png")
    write(vault.root / "img" / "chart.svg", "<svg/>")
    assert (
        apply_changes(
            conn, [vault], {str(vault.root / "attachments" / "pic.png"), str(vault.root / "img" / "chart.svg")}
        )
        == 2
    )
    assert [t for t, f in conn.execute(resolved).fetchall() if f is not None] == ["pic.png", "img/chart.svg"]
    (vault.root / "attachments" / "pic.png").unlink()
    apply_changes(conn, [vault], {str(vault.root / "attachments" / "pic.png")})
    assert [t for t, f in conn.execute(resolved).fetchall() if f is not None] == ["img/chart.svg"]


def test_a_watcher_that_saw_a_path_gone_keeps_the_note_a_move_brought_there_meanwhile(
    conn: apsw.Connection, vault, db_path: Path
) -> None:
    """The watcher finds ``B.md`` gone, then waits for the write lock while a kms move (holding it) brings
    a note there: under the lock the file is looked at again, so the moved note keeps its row and id (the
    stale "gone" deleted it, and the next event indexed it as a new note)."""
    import threading

    write(vault.root / "A.md", "the note that moves\n")
    index_vault(conn, vault)
    nid = note_id(conn, "A")
    mover = connect(db_path)
    mover.execute("BEGIN IMMEDIATE")  # a kms move: the write lock first, then the file, then its row
    waiting, done = threading.Event(), []

    def busy(_tries: int) -> bool:
        waiting.set()  # the watcher has looked (B.md: none) and now waits for the lock
        time.sleep(0.001)  # the wait is the test: a busy handler's backoff while the mover holds the lock
        return True

    def watcher() -> None:
        own = connect(db_path)
        own.set_busy_handler(busy)
        done.append(reindex_file(own, vault, "B.md"))
        own.close()

    t = threading.Thread(target=watcher)
    t.start()
    assert waiting.wait(10)
    os.rename(vault.root / "A.md", vault.root / "B.md")
    mover.execute("UPDATE notes SET path = 'B.md' WHERE path = 'A.md'")
    mover.execute("COMMIT")
    t.join(10)
    assert done == [nid]
    assert conn.execute("SELECT id, path FROM notes").fetchall() == [(nid, "B.md")]
    mover.close()


def test_reindex_file_adds_updates_and_removes(conn: apsw.Connection, vault) -> None:
    write(vault.root / "target.md", "target")
    index_vault(conn, vault)
    write(vault.root / "new.md", "links to [[Target]] and [[Later]]")
    nid = reindex_file(conn, vault, "new.md")
    assert nid and nid == note(conn, "new.md")["id"]
    assert [(ln["target"], ln["dst_path"]) for ln in links_from(conn, "new.md")] == [
        ("Target", "target.md"),
        ("Later", None),
    ]
    write(vault.root / "Later.md", "now it exists")
    reindex_file(conn, vault, "Later.md")
    assert [ln["dst_path"] for ln in links_from(conn, "new.md")] == ["target.md", "Later.md"]
    (vault.root / "target.md").unlink()
    assert reindex_file(conn, vault, "target.md") is None
    assert [ln["dst_path"] for ln in links_from(conn, "new.md")] == [None, "Later.md"]
    # indexing the same file twice keeps one row and one id
    assert reindex_file(conn, vault, "new.md") == nid
    assert scalar(conn, "SELECT count(*) FROM notes WHERE path = 'new.md'") == 1


def test_reindex_file_of_unchanged_bytes_only_follows_the_mtime(conn: apsw.Connection, vault) -> None:
    """The watcher reports kms's own writes too: those must not be parsed and rewritten again."""
    write(vault.root / "n.md", "# N\n\nsome words #tag")
    nid = reindex_file(conn, vault, "n.md")
    before = note(conn, "n.md")
    os.utime(vault.root / "n.md", ns=(before["mtime_ns"] + 5_000_000_000,) * 2)  # touched, same bytes
    assert reindex_file(conn, vault, "n.md") == nid
    after = note(conn, "n.md")
    assert after["indexed_at"] == before["indexed_at"]  # not re-parsed
    assert after["mtime_ns"] == before["mtime_ns"] + 5_000_000_000
    write(vault.root / "n.md", "# N\n\nother words #tag")
    reindex_file(conn, vault, "n.md")
    assert note(conn, "n.md")["body"].endswith("other words #tag")


def test_reindex_file_of_an_indexed_file_does_not_wait_for_the_write_lock(conn: apsw.Connection, vault) -> None:
    """Another process holding the lock (an agent's write) must not stall the watcher's no-op echo."""
    write(vault.root / "n.md", "words")
    nid = reindex_file(conn, vault, "n.md")
    other = connect(conn.filename)
    other.execute("BEGIN IMMEDIATE")
    try:
        conn.set_busy_timeout(50)
        assert reindex_file(conn, vault, "n.md") == nid
        write(vault.root / "n.md", "changed words")
        with pytest.raises(apsw.BusyError):  # a real change does need the lock
            reindex_file(conn, vault, "n.md")
    finally:
        other.execute("ROLLBACK")


def test_forward_links_resolve_when_target_appears_and_unresolve_when_it_goes(conn: apsw.Connection, vault) -> None:
    write(vault.root / "src.md", "[[Future note]] [[fut alias]] [[plans/Future note#Part]]")
    index_vault(conn, vault)
    assert [ln["dst_rid"] for ln in links_from(conn, "src.md")] == [None, None, None]
    write(vault.root / "plans" / "Future note.md", "---\naliases: [Fut Alias]\n---\nhello")
    index_vault(conn, vault)
    assert [ln["dst_path"] for ln in links_from(conn, "src.md")] == ["plans/Future note.md"] * 3
    (vault.root / "plans" / "Future note.md").unlink()
    index_vault(conn, vault)
    assert [ln["dst_rid"] for ln in links_from(conn, "src.md")] == [None, None, None]
    assert scalar(conn, "SELECT count(*) FROM links WHERE dst_rid IS NOT NULL") == 0


def test_alias_change_re_resolves_links(conn: apsw.Connection, vault) -> None:
    write(vault.root / "src.md", "[[Nick]]")
    write(vault.root / "person.md", "---\naliases: [Nick]\n---\n")
    index_vault(conn, vault)
    assert links_from(conn, "src.md")[0]["dst_path"] == "person.md"
    write(vault.root / "person.md", "---\naliases: [Other]\n---\nchanged")
    index_vault(conn, vault)
    assert links_from(conn, "src.md")[0]["dst_rid"] is None


def test_link_resolution_is_case_insensitive(conn: apsw.Connection, vault) -> None:
    write(vault.root / "reference" / "Kubernetes.md", "---\naliases: [k8s]\n---\n")
    write(vault.root / "Café ☕ Notes.md", "coffee")
    write(vault.root / "Éclair.md", "pastry")
    write(vault.root / "src.md", "[[KUBERNETES]] [[K8S]] [[Reference/kubernetes.MD]] [[café ☕ NOTES]] [[éCLAIR]]")
    index_vault(conn, vault)
    assert [ln["dst_path"] for ln in links_from(conn, "src.md")] == [
        "reference/Kubernetes.md",
        "reference/Kubernetes.md",
        "reference/Kubernetes.md",
        "Café ☕ Notes.md",
        "Éclair.md",
    ]
    # looking a note up by what a person types is case-insensitive too (non-ASCII included)
    for ref in ("kubernetes", "K8s", "REFERENCE/KUBERNETES.md", "éclair", "ÉCLAIR.md", "CAFÉ ☕ notes"):
        assert resolve_note(conn, ref)["title"] in ("Kubernetes", "Éclair", "Café ☕ Notes"), ref


def test_links_prefer_path_then_title_then_alias_and_own_vault(conn: apsw.Connection, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = add_vault(conn, tmp_path / "a", "a")
    b = add_vault(conn, tmp_path / "b", "b")
    write(a.root / "Topic.md", "title match in a")
    write(a.root / "other.md", "---\naliases: [Topic]\n---\nalias match in a")
    write(a.root / "src.md", "[[Topic]]")
    write(b.root / "Topic.md", "title match in b")
    write(b.root / "src.md", "[[Topic]]")
    reports = index_all(conn)
    assert [r.vault for r in reports] == ["a", "b"] and all(not r.errors for r in reports)
    got = rows(
        conn,
        """SELECT v.name, d.body FROM links l JOIN notes s ON s.rid = l.src_rid
                        JOIN vaults v ON v.id = s.vault_id JOIN notes d ON d.rid = l.dst_rid ORDER BY v.name""",
    )
    assert got == [{"name": "a", "body": "title match in a"}, {"name": "b", "body": "title match in b"}]


# --- what is not indexed ---------------------------------------------------------------------------


def test_dot_folders_non_markdown_and_outside_symlinks_ignored(conn: apsw.Connection, vault, tmp_path: Path) -> None:
    write(vault.root / "real.md", "a real note")
    write(vault.root / ".obsidian" / "plugins" / "x.md", "plugin doc")
    write(vault.root / ".trash" / "deleted.md", "trashed")
    write(vault.root / "sub" / ".hidden.md", "dot file")
    write(vault.root / "image.png", "not markdown")
    write(vault.root / "notes.txt", "not markdown")
    write(vault.root / "README.markdown", "other extension")
    outside = write(tmp_path / "outside" / "secret.md", "outside the vault")
    os.symlink(outside, vault.root / "link-out.md")
    os.symlink(outside.parent, vault.root / "dir-link")
    os.symlink(vault.root / "real.md", vault.root / "link-in.md")
    report = index_vault(conn, vault)
    assert report.errors == []
    assert sorted(r[0] for r in conn.execute("SELECT path FROM notes")) == ["link-in.md", "real.md"]
    assert search(conn, "outside")["hits"] == [] and search(conn, "trashed")["hits"] == []


def test_upper_case_md_extension_is_markdown(conn: apsw.Connection, vault) -> None:
    write(vault.root / "Shout.MD", "loud")
    index_vault(conn, vault)
    assert note(conn, "Shout.MD")["title"] == "Shout"


# --- unreadable things never drop notes ------------------------------------------------------------


def test_file_replaced_by_fifo_or_dangling_symlink_or_folder_keeps_its_note(conn: apsw.Connection, vault) -> None:
    for name in ("fifo", "dangling", "folder"):
        write(vault.root / f"{name}.md", f"{name} content")
    index_vault(conn, vault)
    ids = pairs(conn, "SELECT path, id FROM notes")
    (vault.root / "fifo.md").unlink()
    os.mkfifo(vault.root / "fifo.md")
    (vault.root / "dangling.md").unlink()
    os.symlink(vault.root / "nowhere.md", vault.root / "dangling.md")
    (vault.root / "folder.md").unlink()
    (vault.root / "folder.md").mkdir()
    report = index_vault(conn, vault, full=True)
    assert report.deleted == 0
    assert pairs(conn, "SELECT path, id FROM notes") == ids
    # the watcher path does not hang on a FIFO either, and keeps the note
    assert reindex_file(conn, vault, "fifo.md") is None
    assert note(conn, "fifo.md")["body"] == "fifo content"


def test_missing_vault_folder_keeps_the_index(conn: apsw.Connection, vault) -> None:
    write(vault.root / "keep.md", "kept")
    index_vault(conn, vault)
    moved = vault.root.with_name("moved-away")
    os.rename(vault.root, moved)
    report = index_vault(conn, vault)
    assert report.errors and "missing" in report.errors[0]
    assert note_row(conn, "keep.md") is not None


def _index_unprivileged(db: Path, vault_name: str) -> dict:
    """Run a full index where permissions apply: as root, in a forked child that drops to 'nobody'."""
    if os.geteuid() != 0:
        c = connect(db)
        try:
            r = index_vault(c, get_vault(c, vault_name), full=True)
            return {"deleted": r.deleted, "errors": r.errors, "updated": r.updated}
        finally:
            c.close()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            c = connect(db)
            r = index_vault(c, get_vault(c, vault_name), full=True)
            c.close()
            out = {"deleted": r.deleted, "errors": r.errors, "updated": r.updated}
            code = 0
        except BaseException:
            out = {"traceback": traceback.format_exc()}
        with contextlib.suppress(BaseException):
            os.write(write_fd, json.dumps(out).encode())
        os._exit(code)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    out = json.loads(b"".join(chunks) or b"{}")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, out
    return out


def test_unreadable_folder_and_file_keep_their_notes() -> None:
    # a world-traversable place, so the unprivileged child can reach the DB and the vault
    base = Path(tempfile.mkdtemp(prefix="kms-perm-"))
    try:
        base.chmod(0o777)
        root = base / "vault"
        write(root / "locked" / "inside.md", "inside a locked folder #locked")
        write(root / "locked" / "deeper" / "deep.md", "deeper still")
        write(root / "secret.md", "an unreadable file [[inside]]")
        write(root / "fine.md", "readable")
        for dirpath, dirnames, filenames in os.walk(base):
            for n in dirnames:
                Path(dirpath, n).chmod(0o777)
            for n in filenames:
                Path(dirpath, n).chmod(0o666)
        db = base / "kms.db"
        c = connect(db)
        v = add_vault(c, root, "perm")
        index_vault(c, v)
        before = pairs(c, "SELECT path, id FROM notes")
        c.close()
        for p in base.iterdir():
            if p.name.startswith("kms.db"):
                p.chmod(0o666)
        assert len(before) == 4
        (root / "locked").chmod(0)
        (root / "secret.md").chmod(0)
        out = _index_unprivileged(db, "perm")
        assert out["deleted"] == 0
        assert any("locked" in e and "cannot read folder" in e for e in out["errors"]), out
        assert any("secret.md" in e and "cannot read" in e for e in out["errors"]), out
        (root / "locked").chmod(0o777)
        (root / "secret.md").chmod(0o666)
        c = connect(db)
        assert pairs(c, "SELECT path, id FROM notes") == before
        assert scalar(c, "SELECT body FROM notes WHERE path = 'secret.md'") == "an unreadable file [[inside]]"
        assert [r["tag"] for r in rows(c, "SELECT tag FROM note_tags")] == ["locked"]
        c.close()
    finally:
        for dirpath, dirnames, _ in os.walk(base):
            for n in dirnames:
                with contextlib.suppress(OSError):
                    Path(dirpath, n).chmod(0o777)
        shutil.rmtree(base, ignore_errors=True)


def test_bad_utf8_is_flagged_and_indexed(conn: apsw.Connection, vault) -> None:
    (vault.root / "latin1.md").write_bytes("caf\xe9 cr\xe8me #legacy".encode("latin-1"))
    report = index_vault(conn, vault)
    assert report.flagged == 1 and report.errors == []
    row = note(conn, "latin1.md")
    assert "not valid UTF-8" in row["fm_error"]
    assert row["tags"] == "legacy"


# --- size, and the files are never touched ---------------------------------------------------------


def test_every_byte_of_a_long_note_is_indexed(conn: apsw.Connection, vault) -> None:
    filler = "".join(f"Paragraph {i} about ordinary things, nothing special here.\n\n" for i in range(20_000))
    text = "# Long\n\n" + filler + "The very last word is zanzibarterminus #endtag [[Tail link]]\n"
    assert len(text.encode()) > 1_000_000
    write(vault.root / "long.md", text)
    index_vault(conn, vault)
    row = note(conn, "long.md")
    assert row["body"] == text and row["size_bytes"] == len(text.encode())
    hits = search(conn, "zanzibarterminus")["hits"]
    assert [h["noteId"] for h in hits] == [row["id"]] and "zanzibarterminus" in hits[0]["excerpt"]
    assert row["tags"] == "endtag"
    [link] = links_from(conn, "long.md")
    assert link["target"] == "Tail link"
    assert scalar(conn, "SELECT line FROM links") == text.count("\n")


def test_indexing_never_modifies_files(conn: apsw.Connection, vault_dir: Path) -> None:
    write(vault_dir / ".obsidian" / "app.json", '{"x": 1}')
    write(vault_dir / "attachments" / "pic.png", "png")
    before = tree_state(vault_dir)
    v = add_vault(conn, vault_dir, "sample")
    index_vault(conn, v)
    index_vault(conn, v, full=True)
    for rel in md_files(vault_dir)[:5]:
        reindex_file(conn, v, rel)
    apply_changes(conn, [v], {str(vault_dir / p) for p in md_files(vault_dir)[:3]})
    set_hidden(conn, note(conn, md_files(vault_dir)[0])["id"], True)
    remove_vault(conn, "sample")
    assert tree_state(vault_dir) == before
    assert list_vaults(conn) == [] and scalar(conn, "SELECT count(*) FROM notes") == 0
    assert scalar(conn, "SELECT count(*) FROM notes_fts") == 0


def test_parallel_parse_matches_serial(conn: apsw.Connection, tmp_path: Path, monkeypatch) -> None:
    """Over the threshold, files are parsed by worker processes; the index must be the same."""
    roots = []
    for name in ("serial", "parallel"):
        root = tmp_path / name
        for i in range(30):
            text = f"---\ntags: [t{i % 4}]\n---\n# N{i}\nbody {i} [[note {i + 1}]]\n"
            write(root / f"d{i % 3}" / f"note {i}.md", text)
        roots.append(add_vault(conn, root, name))
    index_vault(conn, roots[0])
    monkeypatch.setattr(records, "PARALLEL_THRESHOLD", 10)
    monkeypatch.setattr(records, "BATCH", 7)
    seen: list[tuple[int, int]] = []
    report = index_vault(conn, roots[1], progress=lambda done, total: seen.append((done, total)))
    assert report.added == 30 and not report.errors
    assert seen[-1] == (30, 30)
    if (os.cpu_count() or 1) >= 2:  # a worker pool ran: progress came per batch of 7
        assert (7, 30) in seen

    def state(vault_name: str) -> list:
        return rows(
            conn,
            """SELECT n.path, n.tags, n.body, count(l.ord) AS links, count(l.dst_rid) AS resolved
                             FROM notes n JOIN vaults v ON v.id = n.vault_id LEFT JOIN links l ON l.src_rid = n.rid
                             WHERE v.name = ? GROUP BY n.rid ORDER BY n.path""",
            (vault_name,),
        )

    assert state("serial") == state("parallel")
    assert sum(r["resolved"] for r in state("parallel")) == 29


def _children_by_path(conn: apsw.Connection) -> dict[str, dict[str, list]]:
    """Everything the index derives from each note, keyed by path (rids differ between databases)."""
    out: dict[str, dict[str, list]] = {}
    for rid, path in conn.execute("SELECT rid, path FROM notes ORDER BY path"):
        out[path] = {
            "tags": sorted(r[0] for r in conn.execute("SELECT tag FROM note_tags WHERE rid = ?", (rid,))),
            "keys": sorted(tuple(r) for r in conn.execute("SELECT key, kind FROM note_keys WHERE rid = ?", (rid,))),
            "links": [
                tuple(r)
                for r in conn.execute(
                    """SELECT l.ord, l.target, l.heading, l.line, d.path FROM links l
                   LEFT JOIN notes d ON d.rid = l.dst_rid WHERE l.src_rid = ? ORDER BY l.ord""",
                    (rid,),
                )
            ],
            "headings": [
                tuple(r)
                for r in conn.execute("SELECT ord, level, text, line FROM headings WHERE rid = ? ORDER BY ord", (rid,))
            ],
        }
    return out


def test_incremental_updates_match_a_fresh_index(conn: apsw.Connection, vault, tmp_path: Path) -> None:
    """Edits rewrite only the child tables that changed; the result must equal indexing from scratch."""
    root = vault.root
    write(root / "hub.md", "# Hub\n\nSee [[Spoke]] and [[Nick]] #project\n")
    write(root / "spoke.md", "---\naliases: [Spoke]\n---\n# Spoke\n\nback to [[Hub]]\n")
    write(root / "person.md", "---\naliases: [Nick]\n---\nhello #people\n")
    index_vault(conn, vault)
    steps = [
        ("hub.md", "# Hub\n\nSee [[Spoke]] and [[Nick]] #project\n\nmore words, same links\n"),  # body only
        ("spoke.md", "---\naliases: [Spoke]\n---\n# Spoke\n\n## New part\n\nback to [[Hub]]\n"),  # a heading
        ("hub.md", "# Hub\n\ninserted line\nSee [[Spoke]] and [[Nick]] #project\n\nmore words, same links\n"),
        ("person.md", "---\naliases: [Other]\n---\nhello #people #more\n"),  # keys and tags change
        ("new.md", "[[Other]] [[Later]]\n"),
        ("later.md", "now [[new]] exists\n"),
    ]
    for i, (path, text) in enumerate(steps):
        write(root / path, text)
        if i % 2:
            index_vault(conn, vault)  # the whole-vault path
        else:
            reindex_file(conn, vault, path)  # the single-file path (writes, watcher)
    os.replace(root / "person.md", root / "people.md")  # a rename keeps the note, changes its path key
    index_vault(conn, vault)
    fresh = connect(tmp_path / "fresh.db")
    index_vault(fresh, add_vault(fresh, root, "v"))
    assert _children_by_path(conn) == _children_by_path(fresh)
    assert _children_by_path(conn)["new.md"]["links"] == [
        (0, "Other", None, 1, "people.md"),
        (1, "Later", None, 1, "later.md"),
    ]


def test_gc_pause_is_undone_by_the_outermost_caller_even_on_error() -> None:
    import gc

    assert gc.isenabled()
    with pytest.raises(RuntimeError), records.gc_paused():
        with records.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause must not switch it back on early
        raise RuntimeError("boom")
    assert gc.isenabled()
