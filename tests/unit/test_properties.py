"""Properties searchable and filterable (issue 29): the grammar, the rows of YAML and Logseq properties,
the filters on a real index, the ranking of a property match, and the m027 upgrade."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.vaults import index_notes

from server.errors import KmsError
from server.index.indexer import index_vault
from server.index.properties import filters_sql, parse_filter, parse_filters, properties_in_use, property_rows
from server.index.search import search
from server.vault.registry import add_vault

NOTES = {
    "a.md": "---\nstatus: evergreen\nrating: 4\ndue: 2026-05-01\ntype: [book, Film]\n---\n# Alpha\n\nbody\n",
    "b.md": "---\nstatus: draft\nrating: 10\ndue: 2027-01-15\n---\n# Beta\n\nbody\n",
    "c.md": "---\nstatus: done\ndraft: true\n---\n# Gamma\n\nEvergreen trees grow here.\n",
    "d.md": "# Delta\n\nno properties\n",
    "e.md": "---\ndue: 2026-12-31T10:00\n---\n# Epsilon\n",
}


@pytest.fixture
def props_db(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    return index_notes(conn, tmp_path / "v", NOTES)


def paths(conn: apsw.Connection, *filters: str) -> list[str]:
    cond, args = filters_sql(parse_filters(list(filters)))
    return sorted(r[0] for r in conn.execute(f"SELECT path FROM notes n WHERE 1{cond}", args))


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (["status:evergreen"], ["a.md"]),
        (["status:EVERGREEN"], ["a.md"]),
        (["status:evergreen,draft"], ["a.md", "b.md"]),
        (["type:film"], ["a.md"]),  # a list property: any item
        (["draft:*"], ["c.md"]),
        (["-draft:*"], ["a.md", "b.md", "d.md", "e.md"]),
        (["-status:done"], ["a.md", "b.md", "d.md", "e.md"]),
        (["rating>5"], ["b.md"]),  # 10 > 5 as numbers (as text "10" < "5")
        (["rating>=4"], ["a.md", "b.md"]),
        (["rating<4.5"], ["a.md"]),
        (["due<2026-12-31"], ["a.md"]),
        (["due<=2026-12-31"], ["a.md", "e.md"]),  # a date-time compares by its day
        (["due>2026-12-30"], ["b.md", "e.md"]),
        (["due>=2026-05-01", "rating>4"], ["b.md"]),
        (['status:"evergreen"'], ["a.md"]),
        (["nothing:*"], []),
    ],
)
def test_filters(props_db: apsw.Connection, filters: list[str], expected: list[str]) -> None:
    assert paths(props_db, *filters) == expected


@pytest.mark.parametrize("bad", ["", "status", ":x", "status:", "rating>", "rating<1,2", "x" * 501, "a:b,,c"])
def test_a_malformed_filter_is_invalid_input(bad: str) -> None:
    with pytest.raises(KmsError) as e:
        parse_filter(bad)
    assert e.value.kind == "invalid-input" and "status:evergreen" in e.value.message


def test_too_many_filters_are_refused() -> None:
    with pytest.raises(KmsError):
        parse_filters(["a:*"] * 21)


def test_rows_of_yaml_and_logseq_properties(conn: apsw.Connection, tmp_path: Path) -> None:
    assert property_rows({"Status": "Evergreen", "n": 3, "ok": True, "l": ["x", 2], "m": {"k": 1}}) == [
        ("status", 0, "evergreen", None),
        ("n", 0, "3", 3.0),
        ("ok", 0, "true", None),
        ("l", 0, "x", None),
        ("l", 1, "2", 2.0),
    ]
    root = tmp_path / "graph"
    (root / "pages").mkdir(parents=True)
    (root / "logseq").mkdir()
    (root / "logseq" / "config.edn").write_text("{}")
    (root / "pages" / "Book.md").write_text("status:: reading\nrating:: 5\n\n- notes about it\n")
    vault = add_vault(conn, root, "graph", "logseq")
    index_vault(conn, vault)
    assert paths(conn, "status:reading", "rating>=5") == ["pages/Book.md"]


def test_a_property_value_is_found_ranked_below_titles_and_text(props_db: apsw.Connection) -> None:
    hits = [h["path"] for h in search(props_db, "evergreen")["hits"]]
    assert hits == ["c.md", "a.md"]  # the note saying it in its text first, the property second
    assert [h["path"] for h in search(props_db, "props:evergreen")["hits"]] == ["a.md"]
    filtered = search(props_db, "body", where=parse_filters(["rating>=4"]))["hits"]
    assert sorted(h["path"] for h in filtered) == ["a.md", "b.md"]
    listed = search(props_db, "", where=parse_filters(["status:*"]))["hits"]
    assert sorted(h["path"] for h in listed) == ["a.md", "b.md", "c.md"]


def test_properties_in_use_with_common_values(props_db: apsw.Connection) -> None:
    found = {p["key"]: p for p in properties_in_use(props_db)}
    assert found["status"]["notes"] == 3 and not found["status"]["numeric"]
    assert found["rating"]["numeric"] and {v["value"] for v in found["type"]["values"]} == {"book", "film"}
    props_db.execute("UPDATE notes SET hidden_at = 1 WHERE path = 'c.md'")  # hidden notes are not counted
    found = {p["key"]: p for p in properties_in_use(props_db)}
    assert "draft" not in found and found["status"]["notes"] == 2


def test_m027_upgrades_an_index_and_reads_every_note_again(tmp_path: Path) -> None:
    """A note indexed before m027 (its row and FTS entry as m026 kept them) is read again at the next
    index, and then found by its property value and filter; the FTS index stays consistent."""
    from server.store.db import connect
    from server.store.migrations import applied, migrate
    from server.store.note_ids import id_scope, new_note_id

    path = tmp_path / "m026.db"
    old = apsw.Connection(str(path))
    migrate(old, upto="m026_allowlist_paths")
    root = tmp_path / "v"
    root.mkdir()
    (root / "a.md").write_text(NOTES["a.md"])
    old.execute("INSERT INTO vaults(name, root, added_at, dialect) VALUES ('v', ?, 1, 'obsidian')", (str(root),))
    st = (root / "a.md").stat()
    old.execute(
        "INSERT INTO notes(id, vault_id, path, folder, title, body, tags, content_hash, size_bytes, token_estimate, "
        "mtime_ns, created_at, updated_at, indexed_at, summary_state) "
        "VALUES ('n000000000001', 1, 'a.md', '', 'Alpha', 'body', '', ?, ?, 1, ?, 1, 1, 1, 'none')",
        ("x" * 64, st.st_size, st.st_mtime_ns),
    )
    old.execute("INSERT INTO notes_fts(rowid, title, body, tags) SELECT rid, title, body, tags FROM notes")
    old.close()
    conn = connect(path)
    assert "m027_note_properties" in applied(conn)
    assert conn.execute("SELECT content_hash FROM notes").fetchall() == [("",)]  # to be read again
    from server.vault.registry import get_vault

    index_vault(conn, get_vault(conn, "v"))
    derived = new_note_id(id_scope(str(root)), "a.md")  # the id m057 made the old one into
    assert conn.execute("SELECT id FROM notes").fetchall() == [(derived,)]  # same note, same id
    assert paths(conn, "status:evergreen") == ["a.md"]
    assert [h["path"] for h in search(conn, "evergreen")["hits"]] == ["a.md"]
    conn.execute("INSERT INTO notes_fts(notes_fts) VALUES ('integrity-check')")
