"""``paths.locate_notes`` (a rename's linking notes, folder by folder) answers exactly what
``locate_note`` answers for each path: plain notes, symlinked notes and folders, links out of the vault."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.errors import KmsError
from server.vault.paths import locate_note, locate_notes


def test_many_notes_are_located_as_one_by_one(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    (root / "a" / "b").mkdir(parents=True)
    (root / "real").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for rel in ("top.md", "a/one.md", "a/b/two.md", "real/target.md"):
        (root / rel).write_text("x", encoding="utf-8")
    (outside / "far.md").write_text("x", encoding="utf-8")
    os.symlink(root / "real" / "target.md", root / "a" / "alias.md")  # a symlinked note: its target is written
    os.symlink(root / "real", root / "linked")  # a symlinked folder inside the vault
    paths = ["top.md", "a/one.md", "a/b/two.md", "a/alias.md", "linked/target.md", "a/missing.md"]
    assert locate_notes(root, paths) == [locate_note(root, p) for p in paths]
    assert locate_notes(root, ["a/alias.md"])[0][1] == "real/target.md"

    os.symlink(outside / "far.md", root / "a" / "escape.md")
    os.symlink(outside, root / "out")
    for bad in ("a/escape.md", "out/far.md", "../x.md", "a/../top.md", "/abs.md"):
        with pytest.raises(KmsError) as one:
            locate_note(root, bad)
        with pytest.raises(KmsError) as many:
            locate_notes(root, ["top.md", bad])
        assert (many.value.kind, many.value.message) == (one.value.kind, one.value.message)
