"""``paths.real_relpath``: where a vault-relative path really is (symlinks followed through its deepest
existing ancestor, the names not made yet kept), the place every write scope is judged on (issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.errors import KmsError
from server.vault.paths import real_relpath


def test_a_path_is_judged_where_its_deepest_existing_ancestor_really_is(tmp_path: Path) -> None:
    root, outside = tmp_path / "v", tmp_path / "outside"
    (root / "drafts").mkdir(parents=True)
    (root / "archive").mkdir()
    outside.mkdir()
    (root / "drafts" / "portal").symlink_to(Path("..") / "archive", target_is_directory=True)
    (root / "drafts" / "exit").symlink_to(outside, target_is_directory=True)
    assert real_relpath(root, "drafts/a.md") == "drafts/a.md"
    assert real_relpath(root, "drafts/new/deeper/a.md") == "drafts/new/deeper/a.md"  # nothing made yet
    assert real_relpath(root, "drafts/portal/a.md") == "archive/a.md"
    assert real_relpath(root, "drafts/portal/new/deeper/a.md") == "archive/new/deeper/a.md"
    for path in ("drafts/exit/a.md", "drafts/exit/new/a.md", "../v2/a.md", "/etc/passwd", ""):
        with pytest.raises(KmsError) as e:
            real_relpath(root, path)
        assert e.value.kind == "invalid-input"
    with pytest.raises(KmsError) as e:
        real_relpath(root, "drafts/exit/secret.md", hidden=True)
    assert "secret" not in e.value.message and "a note you cannot see" in e.value.message
