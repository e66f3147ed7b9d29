"""Vaults the way people keep them (issue 29): nested vaults refused, an empty path refused, a binary
file named .md flagged and not parsed, a numeric frontmatter title, URL fragments and heading tags, and
createdAt from the file or its frontmatter."""

from __future__ import annotations

import os
import time
from pathlib import Path

import apsw
import pytest
from support.sql import pairs

from server.errors import KmsError
from server.index.indexer import index_vault
from server.vault.birth import birth_time
from server.vault.dialects import DENDRON
from server.vault.parser import parse_note
from server.vault.registry import add_vault, list_vaults

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8 + b" #notatag [[Not A Link]] "


def test_a_vault_inside_a_registered_vault_is_refused_both_ways(conn: apsw.Connection, tmp_path: Path) -> None:
    (tmp_path / "outer" / "inner").mkdir(parents=True)
    (tmp_path / "outer-2").mkdir()
    add_vault(conn, tmp_path / "outer", "outer")
    with pytest.raises(KmsError) as e:
        add_vault(conn, tmp_path / "outer" / "inner", "inner")
    assert e.value.kind == "invalid-input" and e.value.extra == {"vault": "outer", "nested": "inside"}
    assert "kms vault remove outer" in e.value.message
    add_vault(conn, tmp_path / "outer-2", "o2")  # a sibling whose name starts alike is not inside
    conn.execute("DELETE FROM vaults WHERE name = 'outer'")
    add_vault(conn, tmp_path / "outer" / "inner", "inner")
    with pytest.raises(KmsError) as e:
        add_vault(conn, tmp_path / "outer", "outer")
    assert e.value.extra == {"vault": "inner", "nested": "holds"} and "indexed twice" in e.value.message
    assert sorted(v.name for v in list_vaults(conn)) == ["inner", "o2"]


def test_an_empty_path_is_refused(conn: apsw.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        with pytest.raises(KmsError) as e:
            add_vault(conn, empty)
        assert e.value.kind == "invalid-input" and "empty path" in e.value.message
    assert list_vaults(conn) == []


def test_a_binary_file_named_md_is_flagged_and_gives_no_tags_or_links(conn: apsw.Connection, tmp_path: Path) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "photo.md").write_bytes(PNG)
    (root / "latin1.md").write_bytes("# Caf\xe9 notes #real\n".encode("latin-1"))  # bad UTF-8, still text
    index_vault(conn, add_vault(conn, root, "v"))
    notes = pairs(conn, "SELECT path, fm_error FROM notes")
    assert "binary file" in notes["photo.md"] and "binary" not in (notes["latin1.md"] or "")
    tags = [r[0] for r in conn.execute("SELECT tag FROM note_tags")]
    assert tags == ["real"]
    assert conn.execute("SELECT count(*) FROM links").fetchall()[0][0] == 0


@pytest.mark.parametrize(("written", "title"), [("0.119", "0.119"), ("0.10", "0.10"), ("12", "12"), ("'7'", "7")])
def test_a_numeric_frontmatter_title_is_a_title(written: str, title: str) -> None:
    assert parse_note(f"---\ntitle: {written}\n---\nbody", "stem", DENDRON).title == title


@pytest.mark.parametrize(
    ("body", "tags"),
    [
        ("see https://example.com/a_(b)#section and #real", ["real"]),
        ("https://example.com/?q#frag", []),
        ("obsidian://open?vault=x#heading", []),
        ("## Plans #project\n\ntext", ["project"]),
        ("# Title #idea", ["idea"]),
        ("Setext #t2\n=====", ["t2"]),
        ("## Closing ##", []),
    ],
)
def test_url_fragments_are_not_tags_and_heading_tags_are(body: str, tags: list[str]) -> None:
    assert parse_note(body, "s").tags == tags


def test_created_at_comes_from_the_file_or_its_frontmatter(conn: apsw.Connection, tmp_path: Path) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "old.md").write_text("# Old\n")
    (root / "dated.md").write_text("---\ncreated: 2021-03-04\n---\n# Dated\n")
    past = time.time() - 400 * 86_400
    os.utime(root / "old.md", (past, past))  # written long ago (birth time is when the test made it)
    before = time.time()
    index_vault(conn, add_vault(conn, root, "v"))
    created = pairs(conn, "SELECT path, created_at FROM notes")
    assert created["old.md"] == pytest.approx(past, abs=1)  # the earlier of birth and mtime, never index time
    assert created["dated.md"] == pytest.approx(time.mktime((2021, 3, 4, 0, 0, 0, 0, 0, -1)), abs=86_400)
    born = birth_time(str(root / "dated.md"))
    assert born is None or born <= before + 1


def test_created_at_stays_when_an_editor_saves_through_a_new_file(conn: apsw.Connection, tmp_path: Path) -> None:
    """An editor that saves by rename gives the note a new birth time: its createdAt keeps the first one."""
    root = tmp_path / "v"
    root.mkdir()
    (root / "n.md").write_text("# N\n")
    past = time.time() - 86_400
    os.utime(root / "n.md", (past, past))
    vault = add_vault(conn, root, "v")
    index_vault(conn, vault)
    (root / "n.tmp").write_text("# N\n\nmore\n")
    os.replace(root / "n.tmp", root / "n.md")
    index_vault(conn, vault)
    assert conn.execute("SELECT created_at FROM notes").fetchall()[0][0] == pytest.approx(past, abs=1)
