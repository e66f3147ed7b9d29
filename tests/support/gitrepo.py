"""Real git repositories for the git-mode tests: a work tree with its own identity (the test's HOME has no
``~/.gitconfig``), a bare remote, clones."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(cwd: Path, *args: str | bytes, stdin: bytes | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
    """``git ARGS`` in ``cwd``; its standard output (a failure raises with git's message)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, env=env, check=False)
    if done.returncode not in ok:
        raise AssertionError(f"git {args!r} failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
    return done.stdout


def text(cwd: Path, *args: str) -> str:
    return git(cwd, *args).decode("utf-8", "surrogateescape").strip()


def identify(repo: Path, name: str = "Pat Person", email: str = "pat@example.org") -> None:
    git(repo, "config", "user.name", name)
    git(repo, "config", "user.email", email)


def init(repo: Path, files: dict[str, str] | None = None, *, object_format: str | None = None) -> Path:
    """A work tree on branch ``main`` with ``files`` committed by the person."""
    repo.mkdir(parents=True, exist_ok=True)
    fmt = [f"--object-format={object_format}"] if object_format else []
    git(repo, "init", "-q", "-b", "main", *fmt)
    identify(repo)
    for rel, body in (files or {}).items():
        p = repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body, encoding="utf-8")
    if files:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "start")
    return repo


def log(repo: Path, rev: str = "HEAD", *, first_parent: bool = True) -> list[dict[str, object]]:
    """Commits from ``rev`` back (first parents only, unless not ``first_parent``), newest first: author,
    subject, body, the paths each changed."""
    commits: list[dict[str, object]] = []
    for oid in text(repo, "rev-list", *(["--first-parent"] if first_parent else []), rev).split():
        author, subject, body = git(repo, "show", "-s", "--format=%an <%ae>%x00%s%x00%B", oid).split(b"\0", 2)
        names = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--root", oid)
        commits.append(
            {
                "oid": oid,
                "author": author.decode(),
                "subject": subject.decode(),
                "body": body.decode("utf-8", "replace"),
                "paths": sorted(os.fsdecode(n) for n in names.split(b"\0") if n),
            }
        )
    return commits


def show(repo: Path, rev: str, path: str) -> bytes:
    return git(repo, "cat-file", "blob", f"{rev}:{path}")


def status(repo: Path) -> list[str]:
    """``git status --porcelain -z`` records (``XY path``)."""
    return [os.fsdecode(r) for r in git(repo, "status", "--porcelain=v1", "-z", "-uall").split(b"\0") if r]


class GitWriter:
    """A session's real write guard (``support.writes.Writer``) that waits, after each call, for the unit's
    commit (made after the answer by this process's committer: ``server.vault.git_units.flush``)."""

    def __init__(self, db_path: Path, session_id: str, **kw: object) -> None:
        from support.writes import Writer

        self.db_path, self.writer = db_path, Writer(db_path, session_id, **kw)
        self.guard = self.writer.guard

    def _settled(self, answer: dict) -> dict:
        from server.vault.git_units import flush

        assert flush(self.db_path, 30.0), "the unit's commit did not come within 30 s"
        return answer

    def call(self, tool: str, **arguments: object) -> dict:
        return self._settled(self.writer.call(tool, **arguments))

    def spec(self, spec: object, arguments: dict) -> dict:
        """A tool by its spec (the organize tier is not in ``Writer.call``'s table)."""
        return self._settled(self.guard.call(spec, arguments))

    def append(self, note_id: str, content: str) -> dict:
        return self._settled(self.writer.append(note_id, content))

    def create(self, title: str, content: str | None = None) -> dict:
        return self._settled(self.writer.create(title, content))
