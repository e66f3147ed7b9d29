"""Folder allowlist: single-segment globs, empty = everything."""

from __future__ import annotations

import pytest

from server.config.allowlist import Allowlist
from server.errors import KmsError


@pytest.mark.parametrize(
    ("patterns", "folder", "allowed"),
    [
        ([], "anything/at/all", True),
        (["drafts/*"], "drafts/x", True),
        (["drafts/*"], "drafts", False),
        (["drafts/*"], "drafts/x/y", False),
        (["drafts"], "drafts", True),
        (["drafts"], "drafts/x", False),
        (["drafts"], "Drafts", False),
        (["*/inbox"], "a/inbox", True),
        (["*/inbox"], "a/b/inbox", False),
        (["proj-[ab]"], "proj-a", True),
        (["proj-[ab]"], "proj-c", False),
        (["/"], "", True),
        (["."], "", True),
        (["drafts/"], "drafts", True),
        (["drafts/*"], "", False),
    ],
)
def test_allows(patterns: list[str], folder: str, allowed: bool) -> None:
    assert Allowlist(patterns).allows(folder) is allowed


def test_denial_names_allowed_folders() -> None:
    with pytest.raises(KmsError) as e:
        Allowlist(["drafts/*", "/"]).check("notes")
    assert e.value.kind == "folder-denied"
    assert e.value.extra["allowed"] == ["drafts/*", ""]
    assert "drafts/*" in e.value.message and "(vault root)" in e.value.message


def test_parse_and_env() -> None:
    assert Allowlist.parse("drafts/*, inbox\nideas").patterns == ("drafts/*", "inbox", "ideas")
    assert not Allowlist.parse("")
    assert Allowlist.from_env({"KMS_WRITE_ALLOWLIST": "a,b"}).patterns == ("a", "b")
