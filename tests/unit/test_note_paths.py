"""One note-path rule (``server/vault/paths.py`` ``is_note_path``, ``strip_note_suffix``): a file is a
note when its name ends in ``.md`` in any case, and every place that asks (the scan, the watcher,
links, lookups, the Dendron hierarchy, the trash) asks it the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.vault.paths import is_note_path, strip_note_suffix

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

