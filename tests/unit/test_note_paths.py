"""One note-path rule (``server/vault/paths.py`` ``is_note_path``, ``strip_note_suffix``): a file is a
note when its name ends in ``.md`` in any case, and every place that asks (the scan, the watcher,
links, lookups, the Dendron hierarchy, the trash) asks it the same way."""

from __future__ import annotations

import ast
from pathlib import Path

import apsw
import pytest
from support.modules import REPO, parse, project_modules
from support.organize import index, make_vault
from support.vaults import write

from server.index.notes import get_note
from server.store.db import rows
from server.vault.paths import is_note_path, strip_note_suffix
from server.writes.undo import trash

NOTES = ["a.md", "A.MD", "x/y/Note.Md", "x/Note.mD", ".md", "İ.md", "naïve/Ünïcode.md", "a.md.md", "a b.md"]
OTHERS = ["", "a", "md", "amd", "a.m", "a.markdown", "a.md.bak", "a.md/", "a.mdx", "photo.png", "x.mİ", "a.ｍｄ"]


@pytest.mark.parametrize("path", NOTES)
def test_a_note_ends_in_md_in_any_case(path: str) -> None:
    assert is_note_path(path) and is_note_path(Path(path or "."))
    assert path.lower().endswith(".md")  # the test the sites wrote by hand, so nothing changed for them


@pytest.mark.parametrize("path", OTHERS)
def test_anything_else_is_not_a_note(path: str) -> None:
    assert not is_note_path(path)
    assert not path.lower().endswith(".md")


def test_strip_note_suffix_keeps_folders_and_case() -> None:
    assert strip_note_suffix("a/B.MD") == "a/B"
    assert strip_note_suffix("Note.md") == "Note"
    assert strip_note_suffix("a.md.md") == "a.md"
    assert strip_note_suffix(".md") == ""
    for other in OTHERS:
        assert strip_note_suffix(other) == other


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = make_vault(tmp_path / "v", {"Home.md": "home\n"})
    index(conn, root)
    return root


def test_a_note_trashed_by_hand_with_an_upper_case_suffix_is_found_by_its_name(
    vault: Path, conn: apsw.Connection
) -> None:
    write(vault / ".trash" / "Draft.MD", "kept\n")
    done = trash.restore(conn, "Draft")  # ``removesuffix(".md")`` missed it: not-found
    assert done["path"] == "Draft.MD" and done["title"] == "Draft"
    assert (vault / "Draft.MD").read_text() == "kept\n"


def test_an_attachment_restored_from_the_trash_keeps_its_whole_name_as_title(
    vault: Path, conn: apsw.Connection
) -> None:
    write(vault / ".trash" / "img" / "photo.png", "not really a png\n")
    done = trash.restore(conn, "img/photo.png")
    assert done["title"] == "photo.png"  # ``[:-3]`` made it "photo."
    assert (vault / "img" / "photo.png").exists()


def test_a_dendron_note_with_an_upper_case_suffix_has_the_parent_its_name_gives(
    tmp_path: Path, conn: apsw.Connection
) -> None:
    """``a.b.MD`` is the note ``a.b``: its parent is ``a``, and ``a.b.c``'s parent is it (names that no
    file system folds together, so the test holds on every one)."""
    root = make_vault(
        tmp_path / "d", {"dendron.yml": "version: 5\n", "a.md": "top\n", "a.b.MD": "upper\n", "a.b.c.md": "child\n"}
    )
    index(conn, root, "d")
    ids = {r["path"]: r["id"] for r in rows(conn, "SELECT id, path FROM notes")}
    assert get_note(conn, ids["a.b.MD"])["parent"]["path"] == "a.md"
    assert get_note(conn, ids["a.b.c.md"])["parent"]["path"] == "a.b.MD"


def test_no_module_tests_for_a_note_by_hand() -> None:
    """The ``.md`` literal lives in ``server/vault/paths.py``; elsewhere a site asks ``is_note_path`` or
    builds a name with ``NOTE_SUFFIX``. ``server/config`` is below ``server/vault``, so its one test
    (a shell-expanded glob looks like note names) stays by hand."""
    allowed = {"server.vault.paths", "server.config.settings"}
    by_hand = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for module, path in project_modules().items()
        if module not in allowed
        for node in ast.walk(parse(path))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.lower() in (".md", "*.md", "md")
    ]
    assert not by_hand, "use server.vault.paths is_note_path / strip_note_suffix / NOTE_SUFFIX:\n" + "\n".join(by_hand)
