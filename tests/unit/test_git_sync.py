"""Git mode ``sync`` as two machines: a bare repository on disk and two clones, each with its own kms database,
agents writing on both (``server.index.git_sync``, ``server.writes.git_units``), real git throughout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
from support.gitrepo import GitWriter, git, identify, init, log, text
from support.writes import snapshot

from server.index import conflicts
from server.index.git_sync import sync
from server.index.indexer import index_vault
from server.store.db import connect, scalar
from server.vault import git_state
from server.vault.registry import Vault, add_vault, get_vault, set_git_mode
from server.writes.conflict_resolve import resolve_conflict

SEED = {
    "a.md": "# A\n\nfirst line\n",
    "b.md": "# B\n\nsecond note\n",
    "Old.md": "# Old\n\nold body\n",
    "links.md": "# Links\n\nsee [[Old]]\n",
    "kms-memory/facts.md": "# Facts\n\n- the seed fact\n",
}


@dataclass
class Machine:
    root: Path
    conn: apsw.Connection
    writer: GitWriter

    @property
    def vault(self) -> Vault:
        return get_vault(self.conn, "v")

    def sync(self, push: bool = True) -> Any:
        return sync(self.conn, self.vault, push=push)

    def paths(self) -> list[str]:
        return sorted(r[0] for r in self.conn.execute("SELECT path FROM notes"))

    def body(self, path: str) -> str:
        return str(scalar(self.conn, "SELECT body FROM notes WHERE path = ?", (path,)))


def _machine(tmp: Path, name: str, root: Path) -> Machine:
    db = tmp / f"db-{name}" / "kms.db"
    conn = connect(db)
    vault = add_vault(conn, root, "v")
    set_git_mode(conn, "v", "sync")
    index_vault(conn, vault)
    return Machine(root, conn, GitWriter(db, f"session-{name}"))


def two_machines(tmp_path: Path, files: dict[str, str] | None = None) -> tuple[Path, Machine, Machine]:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    a_root = init(tmp_path / "a", files or SEED)
    git(a_root, "remote", "add", "origin", str(bare))
    git(a_root, "push", "-q", "-u", "origin", "main")
    git(tmp_path, "clone", "-q", str(bare), str(tmp_path / "b"))
    identify(tmp_path / "b", "Bo Other", "bo@example.org")
    return bare, _machine(tmp_path, "a", a_root), _machine(tmp_path, "b", tmp_path / "b")


def test_behind_fast_forwards_and_indexes_what_arrived(tmp_path: Path) -> None:
    _bare, a, b = two_machines(tmp_path)
    a.writer.append("a.md", "written on A")
    assert a.sync().pushed is True

    report = b.sync()

    assert report.action == "fast-forward" and report.changed == ["a.md"]
    assert text(b.root, "rev-parse", "HEAD") == text(a.root, "rev-parse", "HEAD")
    assert "written on A" in (b.root / "a.md").read_text()
    assert "written on A" in b.body("a.md")  # the index followed the files
    assert git(b.root, "status", "--porcelain") == b""


def test_diverged_clean_merge_moves_the_branch_and_both_sides_push(tmp_path: Path) -> None:
    _bare, a, b = two_machines(tmp_path)
    a.writer.append("a.md", "written on A")
    a.sync()
    b.writer.append("b.md", "written on B")
    b_head = text(b.root, "rev-parse", "HEAD")

    report = b.sync()

    assert report.action == "merged" and report.pushed is True
    parents = text(b.root, "rev-list", "--parents", "-n", "1", "HEAD").split()[1:]
    assert b_head in parents and text(a.root, "rev-parse", "HEAD") in parents
    assert "written on A" in b.body("a.md") and "written on B" in b.body("b.md")
    assert a.sync().action == "fast-forward"
    assert "written on B" in a.body("b.md")
    assert git(a.root, "status", "--porcelain") == b"" and git(b.root, "status", "--porcelain") == b""


def test_diverged_conflicting_merge_leaves_head_and_files_and_opens_one_conflict(tmp_path: Path) -> None:
    _bare, a, b = two_machines(tmp_path)
    a.writer.append("a.md", "A's ending")
    a.sync()
    b.writer.append("a.md", "B's ending")
    head = text(b.root, "rev-parse", "HEAD")
    files = snapshot(b.root, skip=(b.root / ".git",))

    report = b.sync()
    b.sync()  # again: still one item

    assert report.action == "conflicted" and report.conflicts == ["a.md"]
    assert text(b.root, "rev-parse", "HEAD") == head
    assert snapshot(b.root, skip=(b.root / ".git",)) == files
    items = conflicts.open_conflicts(b.conn)
    assert len(items) == 1
    item = conflicts.get(b.conn, items[0]["id"])  # (the listing carries no blobs; one conflict has them)
    assert item["source"] == "git-merge" and item["path"] == "a.md" and item["copy_path"] is None
    assert b"B's ending" in item["mine"] and b"A's ending" in item["theirs"] and item["base"] == b"# A\n\nfirst line\n"
    problems = git_state.problems(b.conn)
    assert [p["what"] for p in problems] == ["merge"]


def test_a_memory_note_is_merged_by_union(tmp_path: Path) -> None:
    _bare, a, b = two_machines(tmp_path)
    a.writer.append("kms-memory/facts.md", "- a fact from A")
    a.sync()
    b.writer.append("kms-memory/facts.md", "- a fact from B")

    report = b.sync()

    assert report.action == "merged" and not conflicts.open_conflicts(b.conn)
    merged = (b.root / "kms-memory/facts.md").read_text()
    assert "- a fact from A" in merged and "- a fact from B" in merged and "- the seed fact" in merged
    assert "<<<<<<<" not in merged


def test_a_push_the_remote_refuses_is_a_visible_state(tmp_path: Path) -> None:
    bare, a, _b = two_machines(tmp_path)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'read-only remote' >&2\nexit 1\n")
    hook.chmod(0o755)
    a.writer.append("a.md", "written on A")

    report = a.sync()

    assert report.pushed is False
    (problem,) = git_state.problems(a.conn)
    assert problem["what"] == "push" and "read-only remote" in problem["message"] and problem["unpushed"] == 1
    hook.unlink()
    assert a.sync().pushed is True
    assert git_state.problems(a.conn) == []


def test_a_rename_on_a_while_b_edits_the_old_path_leaves_no_duplicate(tmp_path: Path) -> None:
    """git's rename detection carries B's edit to the new name: one note, B's text in it, links rewritten."""
    from server.mcp.tools.organize_tools import KMS_RENAME

    _bare, a, b = two_machines(tmp_path)
    a.writer.spec(KMS_RENAME, {"noteId": "Old.md", "title": "New", "keepAlias": False})
    a.sync()
    b.writer.append("Old.md", "B's edit of the old note")

    report = b.sync()

    assert report.action == "merged", report
    assert "Old.md" not in b.paths() and "New.md" in b.paths()
    assert "B's edit of the old note" in b.body("New.md")
    assert not (b.root / "Old.md").exists()
    assert "[[New]]" in b.body("links.md")
    assert a.sync().action == "fast-forward" and "Old.md" not in a.paths()


def test_each_machines_commits_name_their_session(tmp_path: Path) -> None:
    _bare, a, b = two_machines(tmp_path)
    a.writer.append("a.md", "from A")
    a.sync()
    b.writer.append("b.md", "from B")
    b.sync()
    a.sync()
    bodies = [str(c["body"]) for c in log(a.root, first_parent=False)]
    assert any("Kms-Session: session-a" in x for x in bodies) and any("Kms-Session: session-b" in x for x in bodies)


def test_history_of_a_note_lists_every_machines_commits(tmp_path: Path, monkeypatch: Any) -> None:
    import json

    from support.cli import kms, ok

    _bare, a, b = two_machines(tmp_path)
    a.writer.append("a.md", "from A")
    a.sync()
    b.sync()
    b.writer.append("a.md", "from B")
    b.sync()
    a.sync()
    monkeypatch.setenv("KMS_DB_PATH", a.conn.filename)
    shown = json.loads(ok(kms("history", "a.md", "--json")).stdout)
    sessions = [c["session"] for c in shown["commits"]]
    assert sessions[:2] == ["session-b", "session-a"] and shown["commits"][-1]["subject"] == "start"
    assert "git commits (every machine's)" in ok(kms("history", "a.md")).stdout


def test_revert_refuses_once_the_other_machines_edit_arrived(tmp_path: Path) -> None:
    """A's agent created a note, B's agent added to it, and B's edit came back to A: A's revert refuses
    (``conflict``: it would delete B's text) and changes nothing."""
    import pytest

    from server.errors import KmsError
    from server.writes.undo.revert import revert

    _bare, a, b = two_machines(tmp_path)
    created = a.writer.create("Fresh", "fresh body")
    a.sync()
    b.sync()
    b.writer.append(created["path"], "B adds to it")
    b.sync()
    assert a.sync().action == "fast-forward"
    before = snapshot(a.root, skip=(a.root / ".git",))
    with pytest.raises(KmsError) as refused:
        revert(a.conn, created["invocationId"])
    assert refused.value.kind == "conflict"
    assert snapshot(a.root, skip=(a.root / ".git",)) == before


def test_a_resolved_git_merge_conflict_is_merged_by_the_next_sync(tmp_path: Path) -> None:
    """The person decides (here: an edit of the note in the work tree); the next sync merges with that text,
    HEAD gets both parents, and the upstream takes it."""
    _bare, a, b = two_machines(tmp_path)
    a.writer.append("a.md", "A's ending")
    a.sync()
    b.writer.append("a.md", "B's ending")
    assert b.sync().action == "conflicted"
    (item,) = conflicts.open_conflicts(b.conn)
    (b.root / "a.md").write_text("# A\n\nfirst line\n\nA's ending, then B's\n")
    conflicts.resolve(b.conn, item["id"], "edit")

    report = b.sync()

    assert report.action == "merged" and report.pushed is True, report
    assert (b.root / "a.md").read_text() == "# A\n\nfirst line\n\nA's ending, then B's\n"
    assert len(text(b.root, "rev-list", "--parents", "-n", "1", "HEAD").split()) == 3
    assert git(b.root, "status", "--porcelain") == b""
    assert a.sync().action == "fast-forward" and "A's ending, then B's" in a.body("a.md")
    assert conflicts.open_conflicts(b.conn) == [] and git_state.problems(b.conn) == []


def test_a_rename_on_a_conflicting_with_bs_edit_surfaces_a_conflict_and_no_duplicate(tmp_path: Path) -> None:
    """A renames (the old title kept as an alias: its frontmatter changes); B changes the same frontmatter: the
    merge conflicts. B keeps one note (its own), search shows no duplicate, and a conflict item is open."""
    from server.mcp.tools.organize_tools import KMS_RENAME

    files = {**SEED, "Old.md": "---\nstatus: draft\n---\n# Old\n\nold body\n"}
    _bare, a, b = two_machines(tmp_path, files)
    a.writer.spec(KMS_RENAME, {"noteId": "Old.md", "title": "New", "keepAlias": True})
    a.sync()
    b.writer.call("kms_update_properties", noteId="Old.md", set={"status": "final"})
    head = text(b.root, "rev-parse", "HEAD")

    report = b.sync()

    assert report.action == "conflicted", report
    assert text(b.root, "rev-parse", "HEAD") == head
    assert [p for p in b.paths() if p in ("Old.md", "New.md")] == ["Old.md"]
    items = conflicts.open_conflicts(b.conn)
    assert len(items) == 1 and items[0]["source"] == "git-merge"


def test_a_git_merge_conflict_resolved_theirs_by_the_person_is_merged_by_the_next_sync(tmp_path: Path) -> None:
    """The person's own answer (``resolve_conflict``, what ``kms conflicts resolve`` and the dashboard call) to a
    git-merge conflict, which has no copy file: ``theirs`` writes the other side as their recorded change; the
    next sync merges with it and the upstream takes it."""
    _bare, a, b = two_machines(tmp_path)
    a.writer.append("a.md", "A's ending")
    a.sync()
    b.writer.append("a.md", "B's ending")
    assert b.sync().action == "conflicted"
    (item,) = conflicts.open_conflicts(b.conn)
    theirs = conflicts.get(b.conn, item["id"])["theirs"]

    done = resolve_conflict(b.conn, item["id"], "theirs")

    assert done["kept"] == "theirs" and done["invocationId"] and "trashed" not in done
    assert (b.root / "a.md").read_bytes() == theirs and "B's ending" not in b.body("a.md")
    report = b.sync()
    assert report.action == "merged" and report.pushed is True, report
    assert (b.root / "a.md").read_bytes() == theirs
    assert a.sync().action in ("fast-forward", "none") and "B's ending" not in a.body("a.md")
    assert conflicts.open_conflicts(b.conn) == [] and git_state.problems(b.conn) == []


def test_the_sync_timings_are_settings(tmp_path: Path) -> None:
    """How often the service syncs and how long writes must be quiet first come from the settings file
    (``sync.git_every``, ``sync.git_quiet``), read at each look: no timing is fixed in code."""
    from server.config.settings import default_config_path
    from server.index.git_sync import start_sync_if_due, sync_timings

    _bare, a, _b = two_machines(tmp_path)
    db = tmp_path / "db-a" / "kms.db"
    assert sync_timings() == sync_timings().__class__(60.0, 10.0, 10.0)  # the defaults
    settings = default_config_path()
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text("[sync]\ngit_every = 3600\ngit_quiet = 0\nwatcher_step_aside = 3\n", encoding="utf-8")
    assert sync_timings() == sync_timings().__class__(3600.0, 0.0, 3.0)

    first = start_sync_if_due(db, now=lambda: 100_000.0)
    assert first is not None
    first.join(60)
    assert (git_state.state(a.conn, a.vault.id) or {}).get("fetched_at") is not None
    assert start_sync_if_due(db, now=lambda: 100_100.0) is None  # 100 s later: not due under git_every = 3600
    settings.write_text("[sync]\ngit_every = 60\ngit_quiet = 3600\n", encoding="utf-8")
    a.writer.append("a.md", "a write just now")
    assert start_sync_if_due(db, now=lambda: 100_100.0) is None  # due by the clock, but writes are not quiet
    settings.write_text("[sync]\ngit_every = 60\ngit_quiet = 0\n", encoding="utf-8")
    again = start_sync_if_due(db, now=lambda: 100_100.0)
    assert again is not None
    again.join(60)
