"""``kms vault add PATH --git MODE`` and ``kms vault set NAME git=MODE``: git mode is opted into, kept with the
vault, and refused for a folder in no git work tree."""

from __future__ import annotations

from pathlib import Path

from support.cli import kms, ok, refused, said
from support.gitrepo import init, log

from server.store.db import connect, scalar
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
    assert not scalar(connect(db_path), "SELECT count(*) FROM vaults")  # nothing registered
    ok(kms("vault", "add", str(plain)))
    assert "git work tree" in said(refused(kms("vault", "set", "plain", "git=commit")).stderr)
    assert "must be one of" in said(refused(kms("vault", "set", "plain", "git=always")).stderr)
    assert get_vault(connect(db_path), "plain").git_mode == "off"


def test_a_refused_push_shows_in_status_and_doctor(tmp_path: Path, db_path: Path) -> None:
    """The service's idle job pushes; a remote that refuses is named by ``kms status`` and fails ``kms doctor``."""
    import json

    from support.gitrepo import GitWriter, git

    from server.index.git_sync import start_sync_if_due

    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    root = init(tmp_path / "notes", {"a.md": "# A\n"})
    git(root, "remote", "add", "origin", str(bare))
    git(root, "push", "-q", "-u", "origin", "main")
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'this remote is read-only' >&2\nexit 1\n")
    hook.chmod(0o755)
    ok(kms("vault", "add", str(root), "--git", "sync"))
    GitWriter(db_path, "s-cli").append("a.md", "agent line")

    job = start_sync_if_due(db_path, every_s=0, idle_s=0)
    assert job is not None
    job.join(60)

    status = said(ok(kms("status")).stdout)
    assert "git notes (sync)" in status and "1 commit(s) not pushed" in status
    assert "git push failed" in status and "this remote is read-only" in status
    report = json.loads(kms("doctor", "--json").stdout)
    assert not report["ok"] and [p["what"] for p in report["git"][0]["problems"]] == ["push"]
    assert "git push failed: " in said(kms("doctor").stdout)


def test_the_git_mode_survives_a_lost_database(tmp_path: Path, db_path: Path) -> None:
    """The vaults kept beside the database (``<db>.vaults.json``) keep the git mode: a database made anew has it."""
    import os

    root = init(tmp_path / "notes", {"a.md": "# A\n"})
    ok(kms("vault", "add", str(root), "--git", "sync", "--no-index"))
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(db_path) + suffix):
            os.remove(str(db_path) + suffix)
    assert get_vault(connect(db_path), "notes").git_mode == "sync"


def test_a_process_that_exits_after_its_write_makes_its_commit_first(tmp_path: Path, db_path: Path) -> None:
    """A short-lived process (a CLI write) ends right after its answer: at exit it waits for the commit it owes."""
    import os
    import subprocess
    import sys

    root = init(tmp_path / "notes", {"a.md": "# A\n"})
    ok(kms("vault", "add", str(root), "--git", "commit"))
    tests = Path(__file__).resolve().parents[1]
    script = (
        f"import sys; sys.path.insert(0, {str(tests)!r})\n"
        "from support.writes import Writer\n"
        f"Writer({str(db_path)!r}, 's-short').append('a.md', 'then the process ends')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=dict(os.environ), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert "Kms-Session: s-short" in str(log(root)[0]["body"])
