"""Sync tools' conflict copies: quarantined (never notes), listed, resolvable, and an agent's write to their
note refused. Real files in tmp_path, a real index, the real write guard."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sql import value
from support.writes import Env, Writer, make_env

from server.activity.ratelimit import RateLimiter
from server.errors import KmsError
from server.index import conflicts
from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.index.search import search
from server.store.db import write_tx
from server.vault.registry import get_vault
from server.writes import conflict_resolve

MINE = "# Plan\n\nmine: the laptop's text\n"
THEIRS = "# Plan\n\ntheirs: the desktop's zebrafish text\n"

# (sync tool recorded for the vault, the copy's name, the source kms names)
FIXTURES = [
    ("", "Plan.sync-conflict-20261201-101500-ABCDEFG.md", "syncthing"),
    ("", "Plan (Jane Doe's conflicted copy 2026-12-01).md", "dropbox"),
    ("", "Plan (conflicted copy 2026-12-01).md", "dropbox"),
    ("", "Plan (Case Conflict).md", "dropbox"),
    ("", "Plan (conflicted copy 2026-12-01 101500).md", "nextcloud"),
    ("", "Plan_conflict-20261201-101500.md", "nextcloud"),
    ("onedrive", "Plan-DESKTOP-AB12CD3.md", "onedrive"),
    ("onedrive", "Plan-LAPTOP-Q7RT2MZ9-2.md", "onedrive"),
    ("google-drive", "Plan (1).md", "google-drive"),
    ("icloud", "Plan 2.md", "icloud"),
    ("", "Plan_LOCAL_4242.md", "git-sibling"),
    ("", "Plan_REMOTE_4242.md", "git-sibling"),
    ("", "Plan.md.orig", "git-sibling"),
]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def _with_sync(env: Env, sync: str) -> Env:
    with write_tx(env.conn):
        env.conn.execute("UPDATE vaults SET sync = ? WHERE id = ?", (sync, env.vault.id))
    env.vault = get_vault(env.conn, env.vault.id)
    return env


def _agent(env: Env) -> Writer:
    return Writer(env.db_path, "agent-1", RateLimiter(None, None))


def _vault_with_copy(env: Env, sync: str, copy: str) -> Env:
    _with_sync(env, sync)
    (env.root / "notes").mkdir()
    (env.root / "notes" / "Plan.md").write_text(MINE, encoding="utf-8")
    (env.root / "notes" / copy).write_text(THEIRS, encoding="utf-8")
    index_vault(env.conn, env.vault)
    return env


@pytest.mark.parametrize(("sync", "copy", "source"), FIXTURES)
def test_each_tools_copy_is_quarantined_and_listed(env: Env, sync: str, copy: str, source: str) -> None:
    _vault_with_copy(env, sync, copy)
    assert value(env.conn, "SELECT count(*) FROM notes") == 1  # the note only: the copy is no note
    assert value(env.conn, "SELECT count(*) FROM notes WHERE path = ?", (f"notes/{copy}",)) == 0
    assert value(env.conn, "SELECT count(*) FROM attachments WHERE path = ?", (f"notes/{copy}",)) == 0
    assert search(env.conn, "zebrafish")["hits"] == []  # its words are nowhere in search
    [row] = conflict_resolve.listing(env.conn, diffs=True)
    assert (row["path"], row["copyPath"], row["source"]) == ("notes/Plan.md", f"notes/{copy}", source)
    assert "-mine: the laptop's text" in row["diff"] and "+theirs: the desktop's zebrafish text" in row["diff"]
    index_vault(env.conn, env.vault)  # a second look opens no second conflict
    assert len(conflicts.open_conflicts(env.conn)) == 1


def test_ambiguous_names_are_notes_unless_the_vault_syncs_by_that_tool(env: Env) -> None:
    """``Plan 2.md`` is iCloud's copy only in an iCloud vault (and only beside ``Plan.md``), ``Plan (1).md``
    Google Drive's only in a Google Drive vault, ``Plan-DESKTOP-AB12CD3.md`` OneDrive's only in a OneDrive
    vault; ``Plan-V2.md`` and ``Plan-FINAL.md`` are notes even there (no computer name Windows makes up)."""
    names = ("Plan.md", "Plan 2.md", "Plan-V2.md", "Plan-FINAL.md", "Plan-DESKTOP-AB12CD3.md", "Plan (1).md")
    for name in (*names, "Other 2.md", "Other (1).md"):
        (env.root / name).write_text(f"# {name}\n", encoding="utf-8")
    index_vault(env.conn, env.vault)
    assert value(env.conn, "SELECT count(*) FROM notes") == 8 and conflicts.open_conflicts(env.conn) == []
    index_vault(env.conn, _with_sync(env, "icloud").vault)
    assert [(c["path"], c["copy_path"]) for c in conflicts.open_conflicts(env.conn)] == [("Plan.md", "Plan 2.md")]
    assert value(env.conn, "SELECT count(*) FROM notes WHERE path = 'Plan 2.md'") == 0  # the row indexed before went
    assert value(env.conn, "SELECT count(*) FROM notes WHERE path = 'Other 2.md'") == 1  # no Other.md beside it
    index_vault(env.conn, _with_sync(env, "icloud,onedrive,google-drive").vault)
    copies = ["Plan (1).md", "Plan 2.md", "Plan-DESKTOP-AB12CD3.md"]
    assert sorted(c["copy_path"] for c in conflicts.open_conflicts(env.conn)) == copies
    kept = {str(r[0]) for r in env.conn.execute("SELECT path FROM notes")}
    assert kept == {"Plan.md", "Plan-V2.md", "Plan-FINAL.md", "Other 2.md", "Other (1).md"}


def test_the_watcher_path_opens_and_closes_a_copy_conflict(env: Env) -> None:
    env.note("Plan.md", MINE)
    copy = env.root / "Plan.sync-conflict-20261201-101500-ABCDEFG.md"
    copy.write_text(THEIRS, encoding="utf-8")
    assert reindex_file(env.conn, env.vault, copy.name) is None  # what the watcher calls for a changed file
    [row] = conflicts.open_conflicts(env.conn)
    assert row["source"] == "syncthing" and value(env.conn, "SELECT count(*) FROM notes") == 1
    copy.unlink()  # the person removed it by hand
    reindex_file(env.conn, env.vault, copy.name)
    assert conflicts.open_conflicts(env.conn) == []
    assert value(env.conn, "SELECT resolution FROM conflicts WHERE id = ?", (row["id"],)) == conflicts.COPY_GONE


def test_a_setting_adds_patterns(env: Env) -> None:
    from server.config.settings import default_config_path

    default_config_path().parent.mkdir(parents=True, exist_ok=True)
    default_config_path().write_text('[sync]\nconflict_patterns = ["{note}.conflict-*.md"]\n', encoding="utf-8")
    env.note("Plan.md", MINE)
    (env.root / "Plan.conflict-laptop.md").write_text(THEIRS, encoding="utf-8")
    index_vault(env.conn, env.vault)
    [row] = conflicts.open_conflicts(env.conn)
    assert (row["path"], row["source"]) == ("Plan.md", "pattern")


def test_an_agents_write_to_a_note_in_conflict_is_refused(env: Env) -> None:
    nid = env.note("notes/Plan.md", MINE)
    (env.root / "notes" / "Plan (conflicted copy 2026-12-01).md").write_text(THEIRS, encoding="utf-8")
    index_vault(env.conn, env.vault)
    with pytest.raises(KmsError) as e:
        _agent(env).append(nid, "more from the agent")
    assert e.value.kind == "conflict" and "open dropbox conflict" in e.value.message
    assert e.value.extra["conflictId"] == conflicts.open_conflicts(env.conn)[0]["id"]
    assert env.read("notes/Plan.md") == MINE
    with pytest.raises(KmsError) as made:  # nor may an agent make a file kms would quarantine
        _agent(env).create("Other.sync-conflict-20261201-101500-ABCDEFG")
    assert made.value.kind == "invalid-input"


def test_keep_mine_trashes_the_copy(env: Env) -> None:
    copy = "Plan.sync-conflict-20261201-101500-ABCDEFG.md"
    _vault_with_copy(env, "", copy)
    [row] = conflicts.open_conflicts(env.conn)
    done = conflict_resolve.resolve_conflict(env.conn, row["id"], "mine")
    assert done["trashed"] == f".trash/notes/{copy}" and (env.root / ".trash" / "notes" / copy).read_text() == THEIRS
    assert env.read("notes/Plan.md") == MINE and not (env.root / "notes" / copy).exists()
    assert conflicts.open_conflicts(env.conn) == []
    nid = value(env.conn, "SELECT id FROM notes WHERE path = 'notes/Plan.md'")
    assert _agent(env).append(nid, "the agent may write again")["changed"]
    with pytest.raises(KmsError) as again:
        conflict_resolve.resolve_conflict(env.conn, row["id"], "theirs")
    assert again.value.kind == "conflict"


def test_keep_theirs_rewrites_the_note_as_the_persons_revertible_change(env: Env) -> None:
    copy = "Plan (Jane Doe's conflicted copy 2026-12-01).md"
    _vault_with_copy(env, "", copy)
    nid = value(env.conn, "SELECT id FROM notes WHERE path = 'notes/Plan.md'")
    [row] = conflicts.open_conflicts(env.conn)
    done = conflict_resolve.resolve_conflict(env.conn, row["id"], "theirs")
    assert env.read("notes/Plan.md") == THEIRS and not (env.root / "notes" / copy).exists()
    assert value(env.conn, "SELECT id FROM notes WHERE path = 'notes/Plan.md'") == nid  # the same note
    assert search(env.conn, "zebrafish")["hits"][0]["noteId"] == nid
    assert value(
        env.conn, "SELECT tool || ' ' || actor FROM tool_invocations WHERE id = ?", (done["invocationId"],)
    ) == ("conflict-resolve person")


def test_keep_both_makes_the_other_side_a_note_of_its_own(env: Env) -> None:
    copy = "Plan_conflict-20261201-101500.md"
    _vault_with_copy(env, "", copy)
    [row] = conflicts.open_conflicts(env.conn)
    done = conflict_resolve.resolve_conflict(env.conn, row["id"], "both")
    assert done["newPath"].startswith("notes/Plan (conflict ") and env.read(done["newPath"]) == THEIRS
    assert env.read("notes/Plan.md") == MINE
    assert sorted(r[0] for r in env.conn.execute("SELECT path FROM notes")) == sorted(
        ["notes/Plan.md", done["newPath"]]
    )
    index_vault(env.conn, env.vault)  # the new name is no copy's: no conflict comes back
    assert conflicts.open_conflicts(env.conn) == []


def test_a_git_merge_conflict_without_a_copy_resolves_from_its_sides(env: Env) -> None:
    """h-git's conflicts: no copy file, both sides in the row."""
    env.note("Plan.md", MINE)
    cid = conflicts.open_conflict(
        env.conn, vault_id=env.vault.id, path="Plan.md", source="git-merge", mine=MINE.encode(), theirs=THEIRS.encode()
    )
    found = conflicts.open_for(env.conn, env.vault.id, "Plan.md")
    assert found is not None and found["id"] == cid
    assert "+theirs" in conflict_resolve.view(env.conn, cid)["diff"]
    conflict_resolve.resolve_conflict(env.conn, cid, "theirs")
    assert env.read("Plan.md") == THEIRS and conflicts.open_for(env.conn, env.vault.id, "Plan.md") is None


def test_the_watcher_quarantines_gits_orig_file_not_as_an_attachment(env: Env) -> None:
    from server.index.watcher import apply_changes

    env.note("Plan.md", MINE)
    orig = env.root / "Plan.md.orig"
    orig.write_text(THEIRS, encoding="utf-8")
    apply_changes(env.conn, [env.vault], {str(orig)})  # what the watcher does with a batch of changed paths
    [row] = conflicts.open_conflicts(env.conn)
    assert (row["path"], row["copy_path"], row["source"]) == ("Plan.md", "Plan.md.orig", "git-sibling")
    assert value(env.conn, "SELECT count(*) FROM attachments") == 0


def test_a_copy_removed_while_kms_was_not_running_closes_at_the_next_scan(env: Env) -> None:
    copy = "Plan (conflicted copy 2026-12-01 101500).md"
    _vault_with_copy(env, "", copy)
    [row] = conflicts.open_conflicts(env.conn)
    (env.root / "notes" / copy).unlink()
    index_vault(env.conn, env.vault)
    assert conflicts.open_conflicts(env.conn) == []
    assert value(env.conn, "SELECT resolution FROM conflicts WHERE id = ?", (row["id"],)) == conflicts.COPY_GONE
