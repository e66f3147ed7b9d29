"""``kms vault add`` refuses an empty path and a vault inside another (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import kms, ok, refused, said


def test_an_empty_path_is_refused_not_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "n.md").write_text("# n\n")
    out = refused(kms("vault", "add", ""))
    assert "empty path" in said(out.stderr)
    assert "No vaults yet" in ok(kms("vault", "list")).stdout


def test_a_nested_vault_is_refused_naming_the_outer_one(tmp_path: Path) -> None:
    (tmp_path / "outer" / "inner").mkdir(parents=True)
    (tmp_path / "outer" / "inner" / "n.md").write_text("# n\n")
    ok(kms("vault", "add", str(tmp_path / "outer"), "--name", "outer"))
    out = said(refused(kms("vault", "add", str(tmp_path / "outer" / "inner"))).stderr)
    assert "inside vault 'outer'" in out and "kms vault remove outer" in out
