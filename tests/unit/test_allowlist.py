"""The allowlist: globs over a note's vault-relative path (issue 29), empty = everything; the settings
file and the tokens of version 1 (folder globs) are upgraded to allow exactly what they did."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest
from support.sql import pairs, value

from server.config.allowlist import Allowlist, describe, entry_for, from_folder_glob
from server.errors import KmsError


@pytest.mark.parametrize(
    ("patterns", "path", "allowed"),
    [
        ([], "anything/at/all.md", True),
        (["drafts/*"], "drafts/x.md", True),  # the example: the notes directly in drafts/
        (["drafts/*"], "drafts/x/y.md", False),
        (["drafts/*"], "x.md", False),
        (["drafts/*"], "drafts2/x.md", False),
        (["drafts"], "drafts/x.md", True),  # a folder name: it and below
        (["drafts"], "drafts/x/y/z.md", True),
        (["drafts"], "drafts2/x.md", False),
        (["drafts"], "Drafts/x.md", False),
        (["drafts/plan.md"], "drafts/plan.md", True),
        (["drafts/plan.md"], "drafts/other.md", False),
        (["inbox/*/notes/*"], "inbox/a/notes/n.md", True),
        (["inbox/*/notes/*"], "inbox/a/b/notes/n.md", False),
        (["inbox/*/notes/*"], "inbox/a/notes/deeper/n.md", False),
        (["*/inbox"], "a/inbox/n.md", True),
        (["*/inbox"], "a/inbox/sub/n.md", True),
        (["*/inbox"], "a/b/inbox/n.md", False),
        (["proj-[ab]/*"], "proj-a/n.md", True),
        (["proj-[ab]/*"], "proj-c/n.md", False),
        (["drafts/*.md"], "drafts/n.md", True),
        (["/"], "n.md", True),
        (["/"], "a/n.md", False),
        (["."], "n.md", True),
        (["*"], "n.md", True),
        (["*"], "a/n.md", False),
        (["drafts/"], "drafts/n.md", True),
    ],
)
def test_allows(patterns: list[str], path: str, allowed: bool) -> None:
    assert Allowlist(patterns).allows(path) is allowed


def test_denial_names_the_entries_and_the_one_that_would_allow_it() -> None:
    with pytest.raises(KmsError) as e:
        Allowlist(["drafts/*", "/"]).check("notes/sub/x.md")
    assert e.value.kind == "folder-denied"
    assert e.value.extra["allowed"] == ["drafts/*", "*"]
    assert e.value.extra["wouldAllow"] == "notes/sub/*" and e.value.extra["path"] == "notes/sub/x.md"
    assert "drafts/* (the notes directly in drafts/)" in e.value.message
    assert "'notes/sub/*' would allow it" in e.value.message
    assert Allowlist([e.value.extra["wouldAllow"]]).allows("notes/sub/x.md")


def test_a_hidden_note_is_named_by_its_folder_only() -> None:
    with pytest.raises(KmsError) as e:
        Allowlist(["drafts/*"]).check("secret/diary.md", hidden=True)
    assert "diary" not in e.value.message and "path" not in e.value.extra
    assert e.value.extra["folder"] == "secret"


def test_a_token_narrows_and_its_refusal_says_so() -> None:
    both = Allowlist(["drafts"]).narrowed(["drafts/ok/*"])
    assert both.allows("drafts/ok/n.md") and not both.allows("drafts/n.md")
    with pytest.raises(KmsError) as e:
        both.check("drafts/n.md")
    assert "token" in e.value.message


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("drafts/*", "the notes directly in drafts/"),
        ("drafts", "drafts/ and every folder below it"),
        ("*", "the notes directly in the vault root"),
        ("/", "the notes directly in the vault root"),
        ("inbox/*/notes/*", "the notes directly in inbox/*/notes/ (each * one folder name)"),
        ("drafts/*.md", "the notes whose path matches drafts/*.md (each * within one name)"),
    ],
)
def test_each_entry_says_what_it_allows(entry: str, words: str) -> None:
    assert describe(entry) == words


@pytest.mark.parametrize(
    ("old", "folders_then", "not_then"),
    [
        ("drafts", ["drafts"], ["drafts/x", ""]),
        ("drafts/*", ["drafts/x", "drafts/y"], ["drafts", "drafts/x/y"]),
        ("/", [""], ["a"]),
        (".", [""], ["a"]),
        ("*", ["a", "b"], ["", "a/b"]),
        ("*/inbox", ["a/inbox"], ["a/inbox/x", "a"]),
    ],
)
def test_a_version_1_entry_allows_exactly_the_folders_it_did(
    old: str, folders_then: list[str], not_then: list[str]
) -> None:
    """Version 1 matched the note's folder segment for segment: the upgraded entry allows a note in each
    folder it matched, and none in any other."""
    new = Allowlist([from_folder_glob(old)])
    for folder in folders_then:
        assert new.allows(f"{folder}/n.md" if folder else "n.md"), (old, folder)
    for folder in not_then:
        assert not new.allows(f"{folder}/n.md" if folder else "n.md"), (old, folder)


def test_entry_for_is_the_folder_of_the_note() -> None:
    assert entry_for("a/b/c.md") == "a/b/*" and entry_for("c.md") == "*"


def test_one_grammar_for_a_list_in_one_variable() -> None:
    """The schema's parser splits a list on commas and line breaks, so no pattern may hold one."""
    from server.config.allowlist import folder_glob_problem
    from server.config.values import parse_value

    assert parse_value("write.allowlist", "drafts/*, inbox\nideas,inbox") == ["drafts/*", "inbox", "ideas"]
    assert parse_value("write.allowlist", "") == []
    for bad in ("a,b", "a\nb", "a\rb"):
        assert "one folder per pattern" in (folder_glob_problem(bad) or "")
    assert folder_glob_problem("my notes/*") is None


def test_a_version_1_settings_file_is_upgraded_once_keeping_comments(tmp_path: Path) -> None:
    from server.config import settings as st

    cfg = tmp_path / "config.toml"
    cfg.write_text('# mine\n[write]\nallowlist = ["drafts/*", "inbox", "/"]\n[agent]\nwrite = true\n')
    loaded = st.load_settings(cfg, {}, has_vault=True)
    assert loaded.get("write.allowlist") == ["drafts/*/*", "inbox/*", "*"]
    assert loaded.upgraded and "drafts/*/*" in loaded.upgraded[0]
    text = cfg.read_text()
    assert text.startswith("# mine") and "settings_version = 2" in text and '"drafts/*/*"' in text
    again = st.load_settings(cfg, {}, has_vault=True)  # read in the new grammar: never translated twice
    assert again.get("write.allowlist") == ["drafts/*/*", "inbox/*", "*"] and not again.upgraded and not again.problems


def test_a_new_file_is_written_in_the_new_grammar(tmp_path: Path) -> None:
    from server.config import settings as st

    cfg = tmp_path / "config.toml"
    st.set_value("write.allowlist", ["drafts/*"], path=cfg, env={}, has_vault=True)
    assert "settings_version = 2" in cfg.read_text()
    assert st.load_settings(cfg, {}, has_vault=True).get("write.allowlist") == ["drafts/*"]


def test_a_change_to_a_version_1_file_upgrades_its_allowlist_first(tmp_path: Path) -> None:
    from server.config import settings as st

    cfg = tmp_path / "config.toml"
    cfg.write_text('[write]\nallowlist = ["drafts"]\n')
    st.set_value("agent.write", "true", path=cfg, env={}, has_vault=True)  # another key: the file is upgraded too
    assert st.load_settings(cfg, {}, has_vault=True).get("write.allowlist") == ["drafts/*"]


def test_m026_rewrites_a_tokens_folders_and_a_launcher_sessions_allowlist(tmp_path: Path) -> None:
    from server.store.db import connect
    from server.store.migrations import applied, migrate

    path = tmp_path / "m023.db"
    old = apsw.Connection(str(path))
    migrate(old, upto="m023_idempotency_keys")
    old.execute(
        "INSERT INTO tokens(id, label, kind, scopes, hash, session_id, config, created_at) VALUES "
        "('t1', 'host', 'host', 'tier:write folder:drafts folder:inbox/* approval', 'h', 's1', NULL, 1),"
        "('t2', 'run', 'session', 'tier:write', 'h', 's2', ?, 1)",
        (json.dumps({"KMS_WRITE_ALLOWLIST": "drafts,/", "KMS_ENABLED": "true"}),),
    )
    old.close()
    conn = connect(path)
    assert "m026_allowlist_paths" in applied(conn)
    got = pairs(conn, "SELECT id, scopes FROM tokens")
    assert got["t1"] == "tier:write folder:drafts/* folder:inbox/*/* approval" and got["t2"] == "tier:write"
    env = json.loads(value(conn, "SELECT config FROM tokens WHERE id = 't2'"))
    assert env == {"KMS_WRITE_ALLOWLIST": "drafts/*,*", "KMS_ENABLED": "true"}
    conn.close()
