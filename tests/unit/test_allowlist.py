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


def test_one_grammar_for_a_list_in_one_variable() -> None:
    """The schema's parser splits a list on commas and line breaks, so no pattern may hold one."""
    from server.config.allowlist import folder_glob_problem
    from server.config.schema import parse_value

    assert parse_value("write.allowlist", "drafts/*, inbox\nideas,inbox") == ["drafts/*", "inbox", "ideas"]
    assert parse_value("write.allowlist", "") == []
    for bad in ("a,b", "a\nb", "a\rb"):
        assert "one folder per pattern" in (folder_glob_problem(bad) or "")
    assert folder_glob_problem("my notes/*") is None
