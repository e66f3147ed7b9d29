"""Each dialect's test vault indexed as its own tool shows it (issue 13): backlinks, titles, tags,
dates, attachments and ambiguous names; two vaults in one database never leak into each other."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.dialect_vaults import CHECKOUT_NS, add_indexed, backlink_paths, by_path, checkout
from support.organize import assert_index_is_fresh
from support.vaults import write

from server.errors import KmsError
from server.index.indexer import index_vault
from server.index.listing import list_recent, status
from server.index.notes import find_note, get_note, resolve_note, set_hidden
from server.index.search import search
from server.store.db import rows, scalar
from server.vault.registry import get_vault, set_dialect
from server.writes.context import WriteContext

CHECKOUT_S = CHECKOUT_NS / 1e9


def note(conn: apsw.Connection, vault: str, path: str) -> dict:
    return get_note(conn, by_path(conn, vault, path))


def link_rows(conn: apsw.Connection, path: str) -> list[tuple]:
    return [
        tuple(r.values())
        for r in rows(
            conn,
            """
        SELECT l.target, d.path AS dst, l.dst_file FROM links l JOIN notes s ON s.rid = l.src_rid
        LEFT JOIN notes d ON d.rid = l.dst_rid WHERE s.path = ? ORDER BY l.ord""",
            (path,),
        )
    ]


def search_paths(conn: apsw.Connection, query: str) -> list[str]:
    return [h["path"] for h in search(conn, query, limit=20)["hits"]]


# --- obsidian ------------------------------------------------------------------------------------------


@pytest.fixture
def obsidian(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    add_indexed(conn, "obsidian", tmp_path / "obsidian")
    return conn


def test_obsidian_backlinks_count_markdown_links_like_wiki_links(obsidian: apsw.Connection) -> None:
    assert backlink_paths(obsidian, "obsidian", "Home.md") == ["Projects/Alpha.md", "Projects/Sub Folder/Gamma.md"]
    assert backlink_paths(obsidian, "obsidian", "Projects/Beta.md") == ["Home.md", "Projects/Alpha.md"]
    assert backlink_paths(obsidian, "obsidian", "Projects/Alpha.md") == ["Home.md"]
    assert backlink_paths(obsidian, "obsidian", "Projects/Sub Folder/Gamma.md") == ["Home.md"]
    from server.index.listing import backlinks

    [home] = backlinks(obsidian, by_path(obsidian, "obsidian", "Projects/Sub Folder/Gamma.md"))
    assert "[Gamma](Projects/Sub%20Folder/Gamma.md)" in home["snippet"]  # the link, percent-encoded as written


def test_obsidian_attachments_resolve_and_only_the_missing_are_unresolved(
    obsidian: apsw.Connection, tmp_path: Path
) -> None:
    home = link_rows(obsidian, "Home.md")
    assert ("diagram.png", None, "Attachments/diagram.png") in home
    assert ("Attachments/photo.jpg", None, "Attachments/photo.jpg") in home
    assert ("report.pdf", None, "report.pdf") in home
    st = status(obsidian)
    assert (st["attachmentLinks"], st["unresolvedLinks"]) == (3, 2)  # [[Missing note]] and ![[gone.png]]
    assert scalar(obsidian, "SELECT count(*) FROM notes WHERE path LIKE '%.png' OR path LIKE '%.pdf'") == 0
    root = tmp_path / "obsidian"
    write(root / "Attachments" / "gone.png", "now here")
    (root / "report.pdf").unlink()
    index_vault(obsidian, get_vault(obsidian, "obsidian"))  # no note changed: the attachments did
    home = link_rows(obsidian, "Home.md")
    assert ("gone.png", None, "Attachments/gone.png") in home and ("report.pdf", None, None) in home
    assert status(obsidian)["unresolvedLinks"] == 2


def test_obsidian_frontmatter_title_is_shown_and_searched_and_the_stem_still_names_it(
    obsidian: apsw.Connection,
) -> None:
    alpha = note(obsidian, "obsidian", "Projects/Alpha.md")
    assert alpha["title"] == "Project Alpha" and alpha["tags"] == ["project", "status/active"]
    assert alpha["parent"] is None  # no hierarchy in Obsidian
    assert search_paths(obsidian, "Project Alpha")[0] == "Projects/Alpha.md"
    assert resolve_note(obsidian, "Alpha")["id"] == alpha["id"] == resolve_note(obsidian, "Project Alpha")["id"]
    assert note(obsidian, "obsidian", "Home.md")["aliases"] == ["Start"]


def test_obsidian_dates_from_frontmatter_else_mtime_and_ties_by_path(obsidian: apsw.Connection) -> None:
    assert note(obsidian, "obsidian", "Projects/Alpha.md")["updated_at"] == 1709287200.0  # updated: 2024-03-01T10Z
    recent = list_recent(obsidian, limit=20)
    assert [n["path"] for n in recent] == [
        "Archive/2023/Meeting.md",
        "Home.md",
        "Projects/Beta.md",
        "Projects/Meeting.md",
        "Projects/Sub Folder/Gamma.md",
        "Projects/Alpha.md",
    ]
    assert all(n["updatedAt"] == CHECKOUT_S for n in recent[:-1])
    assert list_recent(obsidian, limit=20) == recent


def test_obsidian_bare_title_same_folder_first_then_shortest_path_and_reported(
    obsidian: apsw.Connection, tmp_path: Path
) -> None:
    assert ("Meeting", "Projects/Meeting.md", None) in link_rows(obsidian, "Projects/Beta.md")  # same folder
    assert ("Meeting", "Projects/Meeting.md", None) in link_rows(obsidian, "Home.md")  # the shortest path
    write(tmp_path / "obsidian" / "Archive" / "2023" / "Retro.md", "see [[Meeting]] and [[2023/Meeting]]")
    index_vault(obsidian, get_vault(obsidian, "obsidian"))
    assert link_rows(obsidian, "Archive/2023/Retro.md") == [
        ("Meeting", "Archive/2023/Meeting.md", None),
        ("2023/Meeting", "Archive/2023/Meeting.md", None),
    ]
    st = status(obsidian)
    assert st["ambiguousLinks"] == 3
    assert st["ambiguous"] == [
        {
            "vault": "obsidian",
            "name": "meeting",
            "links": 3,
            "candidates": ["Archive/2023/Meeting.md", "Projects/Meeting.md"],
        }
    ]
    with pytest.raises(KmsError) as e:
        find_note(obsidian, "Meeting")
    assert e.value.extra["candidates"] == ["Archive/2023/Meeting.md", "Projects/Meeting.md"]
    assert find_note(obsidian, "2023/Meeting")["path"] == "Archive/2023/Meeting.md"  # a shorter path ending


# --- dendron -------------------------------------------------------------------------------------------


@pytest.fixture
def dendron(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    vault = add_indexed(conn, "dendron", tmp_path / "dendron")
    assert vault.dialect == "dendron"
    return conn


def test_dendron_as_dendron_shows_it(dendron: apsw.Connection) -> None:
    assert backlink_paths(dendron, "dendron", "dendron.topic.md") == ["dendron.topic.lookup.md", "root.md"]
    assert backlink_paths(dendron, "dendron", "dendron.topic.lookup.md") == [
        "dendron.topic.md",
        "dendron.topic.schema.md",
    ]
    lookup = note(dendron, "dendron", "dendron.topic.lookup.md")
    assert lookup["title"] == "Lookup" and lookup["tags"] == ["role.bugcatcher"]
    assert (lookup["created_at"], lookup["updated_at"]) == (1690000000.0, 1710000000.0)
    assert search_paths(dendron, "quasar") == ["dendron.topic.lookup.md"]  # only in its desc
    assert search_paths(dendron, "Lookup")[0] == "dendron.topic.lookup.md"
    # the id Dendron gave it names it wherever a note is named, like kms's own id
    assert resolve_note(dendron, "9a2lookupzz0p1q7x3mm4kd")["id"] == lookup["id"]
    assert get_note(dendron, "9a2lookupzz0p1q7x3mm4kd")["id"] == lookup["id"]
    assert resolve_note(dendron, "dendron.topic.lookup")["id"] == lookup["id"]
    assert [n["path"] for n in list_recent(dendron, limit=2)] == ["dendron.topic.lookup.md", "dendron.topic.schema.md"]


def test_dendron_hierarchy_gives_the_nearest_existing_parent(dendron: apsw.Connection, tmp_path: Path) -> None:
    assert note(dendron, "dendron", "dendron.topic.lookup.md")["parent"]["path"] == "dendron.topic.md"
    assert note(dendron, "dendron", "dendron.topic.md")["parent"] is None  # `dendron` is not a note
    assert note(dendron, "dendron", "root.md")["parent"] is None
    write(tmp_path / "dendron" / "dendron.topic.deep.leaf.md", "under a stub")
    index_vault(dendron, get_vault(dendron, "dendron"))
    parent = note(dendron, "dendron", "dendron.topic.deep.leaf.md")["parent"]
    assert parent == {
        "noteId": by_path(dendron, "dendron", "dendron.topic.md"),
        "title": "Topic",
        "path": "dendron.topic.md",
    }


def test_dendron_cross_vault_link_resolves_only_into_the_vault_it_names(
    dendron: apsw.Connection, tmp_path: Path
) -> None:
    assert ("shared.glossary", None, None) in link_rows(dendron, "dendron.topic.lookup.md")
    write(tmp_path / "other" / "shared.glossary.md", "# elsewhere")  # same name, a vault not named
    write(tmp_path / "team" / "shared.glossary.md", "# Glossary")
    from server.vault.registry import add_vault

    index_vault(dendron, add_vault(dendron, tmp_path / "other", "other", "dendron"))
    assert ("shared.glossary", None, None) in link_rows(dendron, "dendron.topic.lookup.md")
    index_vault(dendron, add_vault(dendron, tmp_path / "team", "team", "dendron"))
    assert ("shared.glossary", "shared.glossary.md", None) in link_rows(dendron, "dendron.topic.lookup.md")
    assert backlink_paths(dendron, "team", "shared.glossary.md") == ["dendron.topic.lookup.md"]
    assert backlink_paths(dendron, "other", "shared.glossary.md") == []


def test_a_vault_indexed_as_obsidian_then_set_to_dendron_is_read_again(conn: apsw.Connection, tmp_path: Path) -> None:
    add_indexed(conn, "dendron", tmp_path / "d", "d", dialect="obsidian")
    lookup = note(conn, "d", "dendron.topic.lookup.md")
    assert lookup["tags"] == ["role"]
    assert backlink_paths(conn, "d", "dendron.topic.md") == ["root.md"]  # [[the parent|dendron.topic]] misread
    vault, changed = set_dialect(conn, "d", "dendron")
    assert changed and vault.dialect == "dendron"
    index_vault(conn, vault, full=True)
    assert note(conn, "d", "dendron.topic.lookup.md")["id"] == lookup["id"]  # the same note, read again
    assert note(conn, "d", "dendron.topic.lookup.md")["tags"] == ["role.bugcatcher"]
    assert backlink_paths(conn, "d", "dendron.topic.md") == ["dendron.topic.lookup.md", "root.md"]
    assert set_dialect(conn, "d", "dendron")[1] is False


# --- foam ----------------------------------------------------------------------------------------------


def test_foam_as_foam_shows_it(conn: apsw.Connection, tmp_path: Path) -> None:
    assert add_indexed(conn, "foam", tmp_path / "foam").dialect == "foam"
    assert backlink_paths(conn, "foam", "docs/getting-started.md") == ["readme.md"]
    assert backlink_paths(conn, "foam", "docs/guide.md") == []  # [[guide]] is defined as getting-started
    assert backlink_paths(conn, "foam", "readme.md") == ["docs/getting-started.md", "inbox.md"]
    assert backlink_paths(conn, "foam", "inbox.md") == ["readme.md"]
    started = note(conn, "foam", "docs/getting-started.md")
    assert started["title"] == "Getting Started" and started["tags"] == ["guide", "howto"]
    assert started["updated_at"] == CHECKOUT_S
    assert status(conn)["unresolvedLinks"] == 0


# --- logseq --------------------------------------------------------------------------------------------


def test_logseq_as_logseq_shows_it(conn: apsw.Connection, tmp_path: Path) -> None:
    assert add_indexed(conn, "logseq", tmp_path / "logseq").dialect == "logseq"
    assert backlink_paths(conn, "logseq", "pages/Work___Roadmap.md") == [
        "pages/Project Phoenix.md",
        "pages/Work%2FTeam.md",
    ]
    assert backlink_paths(conn, "logseq", "pages/Project Phoenix.md") == [
        "journals/2024_01_15.md",
        "pages/Work___Roadmap.md",
    ]
    assert backlink_paths(conn, "logseq", "journals/2024_01_15.md") == ["pages/Project Phoenix.md"]
    assert note(conn, "logseq", "pages/Work___Roadmap.md")["title"] == "Work/Roadmap"
    assert note(conn, "logseq", "pages/Work%2FTeam.md")["title"] == "Work/Team"
    journal = note(conn, "logseq", "journals/2024_01_15.md")
    assert journal["title"] == "Jan 15th, 2024" and journal["tags"] == ["meeting"]
    assert journal["updated_at"] == CHECKOUT_S  # Logseq dates a page by its file
    phoenix = note(conn, "logseq", "pages/Project Phoenix.md")
    assert phoenix["tags"] == ["project", "big-idea", "multi-word-tag"]
    assert phoenix["aliases"] == ["Phoenix"] and phoenix["frontmatter"]["status"] == "active"
    assert ("../assets/diagram.png", None, "assets/diagram.png") in link_rows(conn, "pages/Project Phoenix.md")
    assert resolve_note(conn, "Work/Roadmap")["path"] == "pages/Work___Roadmap.md"
    assert resolve_note(conn, "2024-01-15")["path"] == "journals/2024_01_15.md"
    block = "((65a1b2c3-d4e5-4f60-8a9b-0c1d2e3f4a5b))"  # a block reference: a link to the page holding it
    assert link_rows(conn, "journals/2024_01_15.md") == [
        ("Project Phoenix", "pages/Project Phoenix.md", None),
        (block, "pages/Project Phoenix.md", None),
        (block, "pages/Project Phoenix.md", None),
        ("((00000000-0000-4000-8000-000000000000))", None, None),
    ]
    assert link_rows(conn, "pages/Work___Roadmap.md") == [("Phoenix", "pages/Project Phoenix.md", None)]


def test_renaming_a_logseq_page_leaves_block_references_as_they_are(conn: apsw.Connection, tmp_path: Path) -> None:
    """A block reference names the block, not the page: a rename rewrites ``[[Project Phoenix]]`` and leaves
    ``((uuid))`` alone, and the references still lead to the page under its new name."""
    from server.writes.context import load_note
    from server.writes.organize import rename

    vault = add_indexed(conn, "logseq", tmp_path / "logseq")
    journal = vault.root / "journals" / "2024_01_15.md"
    before = journal.read_text(encoding="utf-8")
    ref, v = load_note(conn, note(conn, "logseq", "pages/Project Phoenix.md")["id"])
    out = rename(WriteContext(conn, tmp_path / "locks"), v, ref, title="Project Firebird")
    assert out.result["linksRewritten"]["notes"] == ["journals/2024_01_15.md"]  # ([[Phoenix]]: an alias, kept)
    after = journal.read_text(encoding="utf-8")
    assert after == before.replace("[[Project Phoenix]]", "[[Project Firebird]]")
    block = "((65a1b2c3-d4e5-4f60-8a9b-0c1d2e3f4a5b))"
    assert (block, "pages/Project Firebird.md", None) in link_rows(conn, "journals/2024_01_15.md")
    assert_index_is_fresh(conn, vault.root, tmp_path)  # the rewritten notes indexed as Logseq reads them


# --- two vaults, one database --------------------------------------------------------------------------


@pytest.fixture
def two(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    from server.vault.registry import add_vault

    write(tmp_path / "a" / "Shared.md", "# Shared in a")
    write(tmp_path / "a" / "Only in a.md", "a's own")
    write(tmp_path / "a" / "Topic.md", "a topic at the root")
    write(tmp_path / "a" / "Src.md", "[[Shared]] [[Only in b]] [[Only in a]] [x](Only%20in%20b.md)")
    write(tmp_path / "b" / "Shared.md", "# Shared in b")
    write(tmp_path / "b" / "Only in b.md", "b's own")
    write(tmp_path / "b" / "x" / "Topic.md", "b's topic in a folder")
    write(tmp_path / "b" / "Src.md", "[[Shared]] [[Only in a]] [[Topic]]")
    for name in ("a", "b"):
        index_vault(conn, add_vault(conn, tmp_path / name, name))
    return conn


def test_no_link_resolves_across_vaults(two: apsw.Connection) -> None:
    crossed = rows(
        two,
        """SELECT s.path, l.target FROM links l JOIN notes s ON s.rid = l.src_rid
                           JOIN notes d ON d.rid = l.dst_rid WHERE d.vault_id != s.vault_id""",
    )
    assert crossed == []
    got = rows(
        two,
        """SELECT v.name AS vault, l.target, d.path AS dst FROM links l JOIN notes s ON s.rid = l.src_rid
                       JOIN vaults v ON v.id = s.vault_id LEFT JOIN notes d ON d.rid = l.dst_rid
                       ORDER BY v.name, l.ord""",
    )
    assert [(r["vault"], r["target"], r["dst"]) for r in got] == [
        ("a", "Shared", "Shared.md"),
        ("a", "Only in b", None),
        ("a", "Only in a", "Only in a.md"),
        ("a", "Only in b.md", None),
        ("b", "Shared", "Shared.md"),
        ("b", "Only in a", None),
        ("b", "Topic", "x/Topic.md"),
    ]
    assert backlink_paths(two, "b", "Only in b.md") == []


def test_a_name_in_two_vaults_is_refused_with_candidates(two: apsw.Connection) -> None:
    for ref, candidates in (
        ("Shared", ["a:Shared.md", "b:Shared.md"]),
        ("Topic", ["a:Topic.md", "b:x/Topic.md"]),
    ):  # a path in a, a title in b
        with pytest.raises(KmsError) as e:
            find_note(two, ref)
        assert e.value.kind == "invalid-input" and e.value.extra["candidates"] == candidates
        with pytest.raises(KmsError):
            set_hidden(two, ref, True)
    assert scalar(two, "SELECT count(*) FROM notes WHERE hidden_at IS NOT NULL") == 0  # nothing hidden
    # the vault:path form kms prints names one
    assert find_note(two, "b:Shared.md")["id"] == by_path(two, "b", "Shared.md")
    assert find_note(two, "a:Shared")["id"] == by_path(two, "a", "Shared.md")
    assert find_note(two, "b:Topic")["path"] == "x/Topic.md"
    assert find_note(two, "Only in b")["path"] == "Only in b.md"  # in one vault only: no question
    a_id = int(get_vault(two, "a").id)
    assert find_note(two, "Shared", vault_id=a_id)["path"] == "Shared.md"  # a session scoped to a
    with pytest.raises(KmsError) as e:
        find_note(two, "b:Shared.md", vault_id=a_id)
    assert e.value.kind == "not-found"
    hidden = set_hidden(two, "b:Shared.md", True)
    assert hidden["changed"] and hidden["vault"] == "b"


def test_a_title_that_only_looks_like_vault_path_still_names_its_note(two: apsw.Connection, tmp_path: Path) -> None:
    write(tmp_path / "b" / "a: plan.md", "a colon in the name")
    index_vault(two, get_vault(two, "b"))
    assert find_note(two, "a: plan")["path"] == "a: plan.md"


# --- the upgrade from the schema before dialects ------------------------------------------------------


def test_upgrade_from_m010_detects_the_dialect_and_reads_every_note_again(tmp_path: Path) -> None:
    from server.store.db import connect
    from server.store.migrations import migrate
    from server.store.note_ids import id_scope, new_note_id

    root = checkout("dendron", tmp_path / "d")
    path = tmp_path / "old.db"
    old = apsw.Connection(str(path))
    migrate(old, upto="m010_overwritten")
    old.execute("INSERT INTO vaults(id, name, root, added_at) VALUES (1, 'd', ?, 1.0)", (str(root),))
    old.execute("""INSERT INTO notes(rid, id, vault_id, path, folder, title, tags, content_hash, size_bytes,
                                     token_estimate, mtime_ns, created_at, updated_at, indexed_at, body)
                   VALUES (1, 'nkeepthisid01', 1, 'dendron.topic.lookup.md', '', 'dendron.topic.lookup', 'role',
                           'old', 1, 1, 1, 1.0, 1.0, 1.0, 'old body')""")
    old.execute(
        "INSERT INTO notes_fts(rowid, title, body, tags) VALUES (1, 'dendron.topic.lookup', 'old body', 'role')"
    )
    old.close()
    conn = connect(path)
    vault = get_vault(conn, "d")
    assert vault.dialect is None
    index_vault(conn, vault)  # not --full: a vault read before dialects is read again anyway
    assert get_vault(conn, "d").dialect == "dendron"
    lookup = note(conn, "d", "dendron.topic.lookup.md")
    # the id m057 derived from what the old row held (no frontmatter: its path), kept by the reindex
    kept = new_note_id(id_scope(str(root)), "dendron.topic.lookup.md")
    assert lookup["id"] == kept and lookup["title"] == "Lookup" and lookup["tags"] == ["role.bugcatcher"]
    conn.execute("INSERT INTO notes_fts(notes_fts, rank) VALUES ('integrity-check', 1)")  # FTS rows match
    assert search_paths(conn, "quasar") == ["dendron.topic.lookup.md"] and search_paths(conn, "old") == []
