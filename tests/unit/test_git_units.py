"""Git mode's commit per agent write unit (``server.writes.git_units``), with real git in tmp_path: only the
unit's paths, the person's checkpoint first, awkward names, a SHA-256 repository, trailers and identity."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.gitrepo import GitWriter, git, init, log, show, status

from server.index.indexer import index_vault
from server.store.db import connect
from server.vault import git_state
from server.vault.registry import add_vault, set_git_mode


def _setup(tmp_path: Path, files: dict[str, str], *, object_format: str | None = None, mode: str = "commit"):
    root = init(tmp_path / "vault", files, object_format=object_format)
    db = tmp_path / "db" / "kms.db"
    conn = connect(db)
    vault = add_vault(conn, root, "v")
    set_git_mode(conn, "v", mode)
    index_vault(conn, vault)
    return root, conn, GitWriter(db, "s-git-1")


def test_a_unit_is_one_commit_of_its_paths_only(tmp_path: Path) -> None:
    """The person's staged and unstaged edits in other files are never swept into the agent's commit, and
    their index keeps them staged."""
    root, _conn, w = _setup(tmp_path, {"a.md": "# A\n\none\n", "b.md": "# B\n", "c.md": "# C\n"})
    (root / "b.md").write_text("# B\n\nthe person's unstaged edit\n")
    (root / "c.md").write_text("# C\n\nthe person's staged edit\n")
    git(root, "add", "c.md")
    (root / "untracked.md").write_text("# new, not added\n")
    before = log(root)

    w.append("a.md", "agent line")

    commits = log(root)
    assert len(commits) == len(before) + 1
    top = commits[0]
    assert top["paths"] == ["a.md"]
    author = str(top["author"])
    assert author.endswith("@kms.invalid>") and " via kms" in author
    body = str(top["body"])
    for trailer in ("Kms-Unit: ", "Kms-Session: s-git-1", "Kms-Tool: kms_append", "Kms-Approver: none"):
        assert trailer in body
    assert b"agent line" in show(root, "HEAD", "a.md")
    st = status(root)
    assert " M b.md" in st and "M  c.md" in st and "?? untracked.md" in st
    assert not any(r.endswith("a.md") for r in st), st  # the committed file is clean in the index too


def test_the_persons_uncommitted_edit_is_checkpointed_before_the_agents(tmp_path: Path) -> None:
    """Reverting the agent's commit gives back the person's text, not HEAD's."""
    root, _conn, w = _setup(tmp_path, {"a.md": "# A\n\none\n"})
    (root / "a.md").write_text("# A\n\none\nthe person's line\n")

    w.append("a.md", "agent line")

    agent, checkpoint = log(root)[:2]
    assert checkpoint["author"] == "Pat Person <pat@example.org>"
    assert "Kms-Checkpoint-For: " in str(checkpoint["body"])
    assert show(root, "HEAD~1", "a.md") == b"# A\n\none\nthe person's line\n"
    assert agent["paths"] == ["a.md"] and b"agent line" in show(root, "HEAD", "a.md")
    git(root, "revert", "--no-edit", "HEAD")
    assert (root / "a.md").read_bytes() == b"# A\n\none\nthe person's line\n"


@pytest.mark.parametrize("name", ["b[1].md", "café.md", "new\nline.md", "*.md", ":(glob)x.md"])
def test_awkward_names_are_committed_literally(tmp_path: Path, name: str) -> None:
    """Glob characters, non-ASCII and a newline: the file itself is committed, and only it."""
    files = {name: "# Odd\n", "b1.md": "# other\n", "cafe.md": "# plain\n"}
    root, _conn, w = _setup(tmp_path, files)
    (root / "b1.md").write_text("# other, edited by the person\n")

    w.append(name, "agent line")

    top = log(root)[0]
    assert top["paths"] == [name]
    assert b"agent line" in show(root, "HEAD", name)
    assert " M b1.md" in status(root)


def test_a_sha256_repository(tmp_path: Path) -> None:
    root, _conn, w = _setup(tmp_path, {"a.md": "# A\n"}, object_format="sha256")
    w.append("a.md", "agent line")
    top = log(root)[0]
    assert len(str(top["oid"])) == 64 and top["paths"] == ["a.md"]
    assert status(root) == []


def test_create_and_rename_commit_the_move_as_one_unit(tmp_path: Path) -> None:
    root, _conn, w = _setup(tmp_path, {"a.md": "# A\n\nsee [[Old]]\n", "Old.md": "# Old\n"})
    created = w.create("Fresh", "fresh body")
    assert log(root)[0]["paths"] == [created["path"]]

    from server.mcp.tools.organize_tools import KMS_RENAME

    w.spec(KMS_RENAME, {"noteId": "Old.md", "title": "New", "keepAlias": False})

    top = log(root)[0]
    assert top["paths"] == ["New.md", "Old.md", "a.md"]
    assert status(root) == []


def test_a_vault_not_in_git_mode_runs_no_git(tmp_path: Path) -> None:
    root, _conn, w = _setup(tmp_path, {"a.md": "# A\n"}, mode="off")
    w.append("a.md", "agent line")
    assert len(log(root)) == 1 and " M a.md" in status(root)


def test_a_vault_in_a_subfolder_of_the_work_tree(tmp_path: Path) -> None:
    top = init(tmp_path / "repo", {"notes/a.md": "# A\n", "code.py": "x = 1\n"})
    (top / "code.py").write_text("x = 2\n")
    db = tmp_path / "db" / "kms.db"
    conn = connect(db)
    vault = add_vault(conn, top / "notes", "v")
    set_git_mode(conn, "v", "commit")
    index_vault(conn, vault)
    GitWriter(db, "s").append("a.md", "agent line")
    assert log(top)[0]["paths"] == ["notes/a.md"]
    assert status(top) == [" M code.py"]


def test_a_commit_that_cannot_be_made_is_a_visible_state(tmp_path: Path) -> None:
    """The write stands (it landed and is recorded); the failure is the vault's git state."""
    root, conn, w = _setup(tmp_path, {"a.md": "# A\n"})
    git(root, "checkout", "-q", "--orphan", "elsewhere")  # HEAD now names an unborn branch: still committable
    w.append("a.md", "first")
    assert log(root)[0]["paths"] == ["a.md"]
    import shutil

    shutil.rmtree(root / ".git")  # the repository went away under kms
    out = w.append("a.md", "second")
    assert out["invocationId"]
    assert b"second" in (root / "a.md").read_bytes()
    problems = git_state.problems(conn)
    assert [p["what"] for p in problems] == ["commit"]


def test_a_unit_kept_by_a_process_that_died_is_committed_by_the_next(tmp_path: Path) -> None:
    """The answer keeps the unit (its blobs, a ``git_pending`` row); the commit comes after. A process killed
    right after keeping it (``KMS_CRASH_AT=git.kept``, SIGKILL) loses nothing: the next process's watcher
    commits it (its idle job drains what waits)."""
    import os
    import subprocess
    import sys

    from server.index.git_sync import start_sync_if_due
    from server.vault.git_units import pending

    root, conn, _w = _setup(tmp_path, {"a.md": "# A\n"})
    db = tmp_path / "db" / "kms.db"
    tests = Path(__file__).resolve().parents[1]
    script = (
        f"import sys; sys.path.insert(0, {str(tests)!r})\n"
        "from support.writes import Writer\n"
        f"Writer({str(db)!r}, 's-dies').append('a.md', 'kept before the crash')\n"
    )
    died = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, "KMS_CRASH_AT": "git.kept"}, capture_output=True, check=False
    )
    assert died.returncode == -9, died.stderr.decode()
    assert b"kept before the crash" in (root / "a.md").read_bytes()
    assert len(log(root)) == 1 and pending(conn) == 1

    job = start_sync_if_due(db)  # the next process's watcher, at its first idle tick (git mode commit: no sync)
    assert job is not None
    job.join(60)
    top = log(root)[0]
    assert top["paths"] == ["a.md"] and "Kms-Session: s-dies" in str(top["body"])
    assert status(root) == [] and pending(conn) == 0


def test_another_writers_index_lock_is_waited_for(tmp_path: Path) -> None:
    """obsidian-git holds ``index.lock`` for a moment: the unit's commit waits for it, then lands whole."""
    import threading

    root, _conn, w = _setup(tmp_path, {"a.md": "# A\n"})
    lock = root / ".git" / "index.lock"
    lock.write_bytes(b"")
    threading.Timer(1.5, lock.unlink).start()  # (the other writer finishing, while kms waits)

    w.append("a.md", "agent line")

    assert not lock.exists()
    assert log(root)[0]["paths"] == ["a.md"] and status(root) == []


def test_a_new_note_the_person_ignores_is_not_committed(tmp_path: Path) -> None:
    root, _conn, w = _setup(tmp_path, {"a.md": "# A\n", ".gitignore": "scratch/\n"})
    before = len(log(root))
    w.call("kms_create", title="Draft", content="kept out of git", folder="scratch")
    w.append("a.md", "committed")
    assert len(log(root)) == before + 1 and log(root)[0]["paths"] == ["a.md"]
    assert (root / "scratch" / "Draft.md").exists() and status(root) == []


def _crlf_note(tmp_path: Path, autocrlf: str):
    """A repository with ``core.autocrlf`` set whose note is CRLF in the work tree and LF in HEAD (what
    ``true`` checks out; under ``input``, what a person's editor saved and git normalised at ``git add``)."""
    root = init(tmp_path / "vault", {"a.md": "# A\n\none\n"})
    git(root, "config", "core.autocrlf", autocrlf)
    (root / "a.md").write_bytes(b"# A\r\n\r\none\r\n")
    git(root, "add", "a.md")  # the index learns the file's stat; its blob stays LF
    assert status(root) == [] and show(root, "HEAD", "a.md") == b"# A\n\none\n"
    db = tmp_path / "db" / "kms.db"
    conn = connect(db)
    vault = add_vault(conn, root, "v")
    set_git_mode(conn, "v", "commit")
    index_vault(conn, vault)
    return root, GitWriter(db, "s-git-1")


@pytest.mark.parametrize("autocrlf", ["true", "input"])
def test_an_autocrlf_repository_sees_kms_commits_as_clean(tmp_path: Path, autocrlf: str) -> None:
    """The commit holds what ``git add`` would (LF), so ``git status`` shows nothing changed, and the person's
    CRLF file is no uncommitted edit to checkpoint."""
    root, w = _crlf_note(tmp_path, autocrlf)
    before = log(root)

    w.append("a.md", "agent line")

    assert b"agent line\r\n" in (root / "a.md").read_bytes()  # the work tree keeps its line endings
    commits = log(root)
    assert len(commits) == len(before) + 1 and " via kms" in str(commits[0]["author"])  # no checkpoint
    assert b"\r" not in show(root, "HEAD", "a.md") and b"agent line\n" in show(root, "HEAD", "a.md")
    assert status(root) == []
    assert git(root, "diff", "HEAD", "--stat") == b""


def test_the_persons_revert_and_trash_restore_are_their_own_commits(tmp_path: Path) -> None:
    """``kms revert`` and a trash restore in git mode are committed by kms as the person's units (authored
    as the person), not left in the work tree for the next agent unit's checkpoint."""
    from server.vault.git_units import flush
    from server.writes.undo import trash
    from server.writes.undo.revert import revert

    root, conn, w = _setup(tmp_path, {"a.md": "# A\n\none\n"})
    appended = w.append("a.md", "agent line")
    before = log(root)

    done = revert(conn, appended["invocationId"])
    assert flush(tmp_path / "db" / "kms.db", 30.0)
    top = log(root)[0]
    assert len(log(root)) == len(before) + 1
    assert top["author"] == "Pat Person <pat@example.org>" and top["paths"] == ["a.md"]
    for trailer in (f"Kms-Unit: {done['invocationId']}", "Kms-Session: person", "Kms-Tool: revert"):
        assert trailer in str(top["body"])
    assert show(root, "HEAD", "a.md") == b"# A\n\none\n" and status(root) == []

    (root / ".trash").mkdir()
    (root / ".trash" / "kept.md").write_text("# Kept\n\nput in the trash by hand\n", encoding="utf-8")
    trash.restore(conn, "kept.md")
    assert flush(tmp_path / "db" / "kms.db", 30.0)
    top = log(root)[0]
    assert top["author"] == "Pat Person <pat@example.org>" and top["paths"] == ["kept.md"]
    assert "Kms-Tool: trash-restore" in str(top["body"])
    assert not any(r.endswith("kept.md") for r in status(root))
