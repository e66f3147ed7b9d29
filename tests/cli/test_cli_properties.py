"""``kms search --where`` and ``kms properties`` (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import kms, ok, refused, said


def test_search_where_and_properties(tmp_path: Path) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "a.md").write_text("---\nstatus: evergreen\ndue: 2026-03-01\n---\n# Alpha\n\nplans\n")
    (root / "b.md").write_text("---\nstatus: draft\ndue: 2027-03-01\n---\n# Beta\n\nplans\n")
    ok(kms("vault", "add", str(root), "--name", "v"))
    hits = json.loads(ok(kms("search", "plans", "--where", "due<2026-12-31", "--json")).stdout)["hits"]
    assert [h["path"] for h in hits] == ["a.md"]
    hits = json.loads(ok(kms("search", "evergreen", "--json")).stdout)["hits"]
    assert [h["path"] for h in hits] == ["a.md"]
    assert "invalid" in said(refused(kms("search", "plans", "-w", "due<")).stderr).lower()
    out = said(ok(kms("properties")).stdout)
    assert "status" in out and "evergreen (1)" in out
