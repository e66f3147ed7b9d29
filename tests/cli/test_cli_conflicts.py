"""``kms conflicts`` (with its diff), ``kms conflicts resolve``, ``kms vault set NAME sync=`` and what
``kms vault list`` / ``kms status`` show of them, over real files."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import kms, ok, refused, said


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "v"
    root.mkdir()
    (root / "Plan.md").write_text("# Plan\n\nmine\n", encoding="utf-8")
    (root / "Plan.sync-conflict-20261201-101500-ABCDEFG.md").write_text("# Plan\n\ntheirs\n", encoding="utf-8")
    (root / "Plan 2.md").write_text("# Plan 2\n\nanother note, or iCloud's copy\n", encoding="utf-8")
    ok(kms("vault", "add", str(root)))
    return root


def test_conflicts_listed_with_a_diff_and_resolved(tmp_path: Path) -> None:
    root = _vault(tmp_path)
    out = said(ok(kms("conflicts")).stdout)
    assert "#1 v:Plan.md — syncthing" in out and "-mine" in out and "+theirs" in out
    [item] = json.loads(ok(kms("conflicts", "--json")).stdout)
    assert item["copyPath"] == "Plan.sync-conflict-20261201-101500-ABCDEFG.md"
    assert "1 open conflict(s)" in said(ok(kms("status")).stdout)
    refused(kms("conflicts", "resolve", "1"))  # keep what? nothing done
    refused(kms("conflicts", "resolve", "1", "--keep", "everything"))
    assert said(ok(kms("conflicts", "resolve", "1", "--keep", "theirs")).stdout).startswith(
        "conflict #1 (v:Plan.md): the note is the other side now"
    )
    assert (root / "Plan.md").read_text() == "# Plan\n\ntheirs\n"
    assert "No open conflicts." in ok(kms("conflicts")).stdout
    refused(kms("conflicts", "resolve", "1", "--keep", "mine"))  # resolved already


def test_vault_set_sync_changes_which_names_are_copies(tmp_path: Path) -> None:
    _vault(tmp_path)
    listed = json.loads(ok(kms("vault", "list", "--json")).stdout)
    assert (listed[0]["sync"], listed[0]["conflicts"]) == ("", 1)
    assert "Plan 2" in ok(kms("search", "another")).stdout  # a note while the vault is not on iCloud
    assert "is kept in sync by icloud now" in said(ok(kms("vault", "set", "v", "sync=icloud")).stdout)
    assert json.loads(ok(kms("vault", "list", "--json")).stdout)[0]["conflicts"] == 2
    assert "Plan 2" not in ok(kms("search", "another")).stdout  # iCloud's copy of Plan.md now
    ok(kms("vault", "set", "v", "sync=none"))
    assert json.loads(ok(kms("vault", "list", "--json")).stdout)[0]["conflicts"] == 1
    assert "Plan 2" in ok(kms("search", "another")).stdout
    assert "say one or more of" in said(refused(kms("vault", "set", "v", "sync=floppy")).stderr)


def test_resolve_by_editing_the_note_and_doctor_names_the_sync_tool(tmp_path: Path) -> None:
    root = _vault(tmp_path)
    editor = 'sh -c \'printf "# Plan\\n\\nmerged by hand\\n" > "$0"\''  # the person's $EDITOR saves the note
    out = said(ok(kms("conflicts", "resolve", "1", "--edit", EDITOR=editor, VISUAL="")).stdout)
    assert "kept the note as it is" in out and "the copy is in .trash/" in out
    assert (root / "Plan.md").read_text() == "# Plan\n\nmerged by hand\n"
    ok(kms("vault", "set", "v", "sync=syncthing"))
    doctor = said(kms("doctor").stdout)
    assert "kept in sync by syncthing — kms's own writes run here (sync.own_writes_here)" in doctor
