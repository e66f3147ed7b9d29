"""``kms vault add PATH --git MODE`` and ``kms vault set NAME git=MODE``: git mode is opted into, kept with the
vault, and refused for a folder in no git work tree."""

from __future__ import annotations

from pathlib import Path

from support.cli import kms, ok, refused, said
from support.gitrepo import init, log

from server.store.db import connect
from server.vault.registry import get_vault


def test_vault_add_with_git_commit_then_set_it_off(tmp_path: Path, db_path: Path) -> None:
    root = init(tmp_path / "notes", {"a.md": "# A\n"})
    out = ok(kms("vault", "add", str(root), "--git", "commit"))
    assert "git mode: commit" in said(out.stdout)
    assert get_vault(connect(db_path), "notes").git_mode == "commit"
    ok(kms("vault", "set", "notes", "git=sync"))
    assert get_vault(connect(db_path), "notes").git_mode == "sync"
    ok(kms("vault", "set", "notes", "git=off"))
    assert get_vault(connect(db_path), "notes").git_mode == "off"
    assert len(log(root)) == 1  # opting in commits nothing by itself


def test_git_mode_refused_outside_a_work_tree_and_for_an_unknown_mode(tmp_path: Path, db_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.md").write_text("# A\n")
    res = refused(kms("vault", "add", str(plain), "--git", "commit"))
    assert "git work tree" in said(res.stderr)
    assert not connect(db_path).execute("SELECT count(*) FROM vaults").fetchone()[0]  # nothing registered
    ok(kms("vault", "add", str(plain)))
    assert "git work tree" in said(refused(kms("vault", "set", "plain", "git=commit")).stderr)
    assert "must be one of" in said(refused(kms("vault", "set", "plain", "git=always")).stderr)
    assert get_vault(connect(db_path), "plain").git_mode == "off"
