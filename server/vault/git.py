"""The one way kms runs git: a typed wrapper around the git command line.

Every rule the git code of other note servers learned by bug reports is here, once:

- **Paths are bytes.** Output that lists paths is asked NUL-separated (``-z``) and decoded with the file
  system's encoding (``os.fsdecode``, surrogates for bytes that are not UTF-8); paths sent to git are
  ``os.fsencode``d. No C-style quoting is ever parsed (``core.quotePath=false`` besides).
- **Pathspecs are literal** (``GIT_LITERAL_PATHSPECS=1``): ``b[1].md`` names that file, never a glob.
- **Reads take no lock** (``GIT_OPTIONAL_LOCKS=0``): a ``git status`` kms runs never refreshes the index
  under the person's editor or obsidian-git.
- **A held ``index.lock`` is waited for** (``LOCK_WAIT_S``): obsidian-git commits on a timer; a write that
  meets its lock is retried, then fails with ``GitLocked``.
- **Behaviour never comes from the machine's config**: ``GIT_CONFIG_NOSYSTEM=1``, and every key that would
  change what kms's plumbing does is pinned per command (``PINNED``: no fsmonitor, no auto-gc in a
  write's answer, no signing prompt). The person's own ``~/.gitconfig`` is still read, on purpose: it holds their
  identity, which kms keeps as the committer of the commits it makes and the author of their checkpoints,
  and their remotes' credentials helpers, which a push needs.
- **Identity per command**: kms never writes ``user.name``; a commit's author and committer are given with
  the commit (``Identity``), so threads and sessions never share one.
- **Errors are typed**: ``GitMissing`` (no git), ``NotARepo``, ``GitTooOld``, ``GitLocked``, ``GitFailed`` (the
  command, its exit code and its message).

Nothing here knows about notes or the index; ``server.writes.git_units`` and ``server.index.git_sync`` use it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCK_WAIT_S = 5.0  # how long a write waits for another writer's index.lock (obsidian-git commits quickly)
TIMEOUT_S = 120.0  # one git command (a fetch over a slow network is the long one)
MERGE_TREE_MIN = (2, 38)  # ``git merge-tree --write-tree``

PINNED = (
    "core.quotePath=false",
    "core.fsmonitor=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "commit.gpgSign=false",
    "fetch.recurseSubmodules=false",
    "merge.renames=true",
    "diff.renames=true",
    "core.safecrlf=false",
)
_DROPPED_ENV = (  # a caller's environment never redirects kms's git to another repository or index
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_PREFIX",
)


class GitError(Exception):
    """A git command kms needed failed (the subclasses say how)."""


class GitMissing(GitError):
    """No ``git`` on PATH."""


class NotARepo(GitError):
    """The folder is not inside a git work tree."""


class GitTooOld(GitError):
    """This git lacks a command kms needs (``merge-tree --write-tree``: 2.38)."""


class GitLocked(GitError):
    """Another writer held ``index.lock`` (or a ref's lock) past ``LOCK_WAIT_S``."""


class GitFailed(GitError):
    """A git command exited non-zero: ``args``, ``code`` and git's own message."""

    def __init__(self, args: Sequence[str], code: int, stderr: str) -> None:
        self.args_run, self.code, self.stderr = list(args), code, stderr.strip()
        super().__init__(f"git {' '.join(args[:3])} failed ({code}): {self.stderr[-500:]}")


@dataclass(frozen=True)
class Identity:
    """Who a commit is by (``name <email>``), given with the command, never written into a config."""

    name: str
    email: str

    def line(self, when: float) -> bytes:
        """The ``name <email> seconds +0000`` of a fast-import ``author``/``committer`` command."""
        safe = re.sub(r"[<>\n]", "", self.name).strip() or "unknown"
        email = re.sub(r"[<>\n]", "", self.email).strip()
        return f"{safe} <{email}> {int(when)} +0000".encode()


FALLBACK_PERSON = Identity("person", "person@localhost")
TRAILERS = ("Kms-Session", "Kms-Unit", "Kms-Tool")  # what kms's commits name (``server.writes.git_units``)


@dataclass(frozen=True)
class Entry:
    """One path in a tree: mode (``100644``...), type (``blob``), object id."""

    mode: str
    type: str
    oid: str


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_LITERAL_PATHSPECS="1",
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="true",  # a remote that wants a password fails at once, never waits on a prompt
        GIT_EDITOR="true",
        LC_ALL="C",  # messages kms reads (lock contention) in one language
    )
    if extra:
        env.update(extra)
    return env


def fs(path: str) -> bytes:
    """A path as git gets it: the file system's bytes."""
    return os.fsencode(path)


def split_z(out: bytes) -> list[str]:
    """NUL-separated output as names (``os.fsdecode``: the bytes round-trip)."""
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def _locked(stderr: str) -> bool:
    return ".lock" in stderr and ("File exists" in stderr or "Unable to create" in stderr or "cannot lock" in stderr)


def version() -> tuple[int, int]:
    """The installed git's (major, minor); ``GitMissing`` without one."""
    try:
        out = subprocess.run(["git", "--version"], capture_output=True, check=True, env=_env()).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as e:
        raise GitMissing("git is not installed (or not on PATH)") from e
    m = re.search(r"(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


class Repo:
    """One git work tree, as kms reaches it: ``top`` (the work tree's root), ``git_dir``, the object format
    (``sha1`` or ``sha256``), and ``prefix``: where the vault's folder is inside the work tree ('' at its
    root). Made by ``open_repo``."""

    def __init__(
        self, top: Path, git_dir: Path, object_format: str, prefix: str, common_dir: Path | None = None
    ) -> None:
        self.top, self.git_dir, self.object_format, self.prefix = top, git_dir, object_format, prefix
        self.common_dir = common_dir or git_dir  # (a linked work tree's objects are in the main one's)
        self._person: Identity | None = None

    # ----- running -------------------------------------------------------------------------------------

    def run(
        self,
        *args: str | bytes,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        ok: Iterable[int] = (0,),
        write: bool = False,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git ARGS`` in the work tree; ``GitFailed`` unless its exit code is in ``ok``. ``write``: a
        command that takes a lock, retried while another writer holds it (``GitLocked`` past ``LOCK_WAIT_S``)."""
        argv: list[str | bytes] = ["git"]
        for pin in PINNED:
            argv += ["-c", pin]
        argv += list(args)
        deadline = time.monotonic() + LOCK_WAIT_S
        delay = 0.02
        while True:
            try:
                done = subprocess.run(
                    argv,
                    cwd=self.top,
                    input=stdin,
                    capture_output=True,
                    env=_env(env),
                    timeout=TIMEOUT_S,
                    check=False,
                )
            except FileNotFoundError as e:
                raise GitMissing("git is not installed (or not on PATH)") from e
            if done.returncode in ok:
                return done
            err = done.stderr.decode("utf-8", "replace")
            shown = [a if isinstance(a, str) else os.fsdecode(a) for a in args]
            if write and _locked(err):
                if time.monotonic() >= deadline:
                    raise GitLocked(f"another program held git's lock for {LOCK_WAIT_S:g} s: {err.strip()[-300:]}")
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
                continue
            raise GitFailed(shown, done.returncode, err)

    def out(self, *args: str | bytes, **kw: object) -> bytes:
        """The standard output of ``git ARGS`` (see ``run``)."""
        return self.run(*args, **kw).stdout  # type: ignore[arg-type]

    def text(self, *args: str | bytes, **kw: object) -> str:
        """The standard output as one line of text (a ref, an oid)."""
        return os.fsdecode(self.out(*args, **kw)).strip()

    # ----- paths ---------------------------------------------------------------------------------------

    def path_of(self, vault_rel: str) -> str:
        """The work-tree path of a vault-relative path."""
        return f"{self.prefix}/{vault_rel}" if self.prefix else vault_rel

    def vault_rel(self, top_rel: str) -> str | None:
        """The vault-relative path of a work-tree path (None: outside the vault's folder)."""
        if not self.prefix:
            return top_rel
        head = self.prefix + "/"
        return top_rel[len(head) :] if top_rel.startswith(head) else None

    # ----- objects -------------------------------------------------------------------------------------

    def blob_id(self, data: bytes) -> str:
        """The id git gives a blob of these bytes, computed here (no process): how kms tells whether a file
        is what a commit holds."""
        h = hashlib.new("sha256" if self.object_format == "sha256" else "sha1")
        h.update(b"blob %d\0" % len(data))
        h.update(data)
        return h.hexdigest()

    def write_blob(self, data: bytes) -> str:
        """Put a blob of these bytes into the repository's objects, as git writes a loose object (zlib, a temp
        file renamed into place), without a process: a write unit's bytes are kept this way inside its answer
        (microseconds), and committed after it (``server.vault.git_units``). Its id."""
        oid = self.blob_id(data)
        folder = self.common_dir / "objects" / oid[:2]
        target = folder / oid[2:]
        if target.exists():
            return oid
        folder.mkdir(exist_ok=True)
        tmp = folder / f"tmp_obj_kms_{os.getpid()}_{threading.get_ident()}"
        tmp.write_bytes(zlib.compress(b"blob %d\0" % len(data) + data, 1))
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)
        return oid

    def stored_blob(self, path: str, data: bytes) -> str:
        """The blob git itself stores for a file of these bytes at the work-tree ``path``: its clean filters
        applied (``core.autocrlf`` true or input, ``.gitattributes`` ``text``/``eol``: CRLF becomes LF), as
        ``git add`` would. A repository that normalises line endings would otherwise see a CRLF file kms
        committed as changed. Bytes without a carriage return are stored as they are (no process)."""
        if b"\r" not in data:
            return self.write_blob(data)
        out = self.out("-c", "core.safecrlf=false", "hash-object", "-w", "--stdin", b"--path=" + fs(path), stdin=data)
        return os.fsdecode(out).strip()

    def has_object(self, oid: str) -> bool:
        """Whether the object exists (loose: a stat; packed: asked of git)."""
        if (self.common_dir / "objects" / oid[:2] / oid[2:]).exists():
            return True
        return self.run("cat-file", "-e", oid, ok=(0, 1, 128)).returncode == 0

    @property
    def zero_oid(self) -> str:
        return "0" * (64 if self.object_format == "sha256" else 40)

    def head(self) -> tuple[str | None, str | None]:
        """(the branch HEAD names: ``refs/heads/...``, None when detached; the commit, None on an unborn
        branch). One process when HEAD has a commit (the usual case: it is asked in a write's answer)."""
        both = self.run("rev-parse", "HEAD", "--symbolic-full-name", "HEAD", ok=(0, 128))
        if both.returncode == 0:
            oid, name = os.fsdecode(both.stdout).split()[:2]
            return (None if name == "HEAD" else name), oid
        branch = os.fsdecode(self.run("symbolic-ref", "-q", "HEAD", ok=(0, 1)).stdout).strip() or None
        return branch, None

    def entries(self, treeish: str, paths: Sequence[str]) -> dict[str, Entry]:
        """What ``treeish`` holds at each of ``paths`` (work-tree paths; a path it lacks is absent)."""
        if not paths:
            return {}
        out = self.out("ls-tree", "-z", "--full-tree", treeish, "--", *map(fs, paths))
        wanted, found = set(paths), {}
        for rec in out.split(b"\0"):
            if not rec:
                continue
            meta, _tab, name = rec.partition(b"\t")
            path = os.fsdecode(name)
            mode, typ, oid = meta.decode().split(" ")
            if path in wanted:
                found[path] = Entry(mode, typ, oid)
        return found

    def blob(self, oid: str) -> bytes:
        """A blob's bytes."""
        return self.out("cat-file", "blob", oid)

    def path_log(self, path: str, limit: int = 50) -> list[dict[str, Any]]:
        """The commits that changed the work-tree ``path`` (followed across renames), newest first, whichever
        machine made them: id, time, author, subject and kms's trailers (session, unit, tool), empty for a
        commit kms did not make."""
        fields = ("%H", "%at", "%an <%ae>", "%s", *(f"%(trailers:key={k},valueonly,separator=%x2C)" for k in TRAILERS))
        out = self.out("log", "--follow", f"-n{int(limit)}", "-z", "--format=" + "%x1f".join(fields), "--", fs(path))
        commits: list[dict[str, Any]] = []
        for rec in out.split(b"\0"):
            if not rec.strip():
                continue
            oid, at, author, subject, session, unit, tool = rec.decode("utf-8", "replace").split("\x1f")
            commits.append(
                {
                    "commit": oid.strip(),
                    "at": float(at),
                    "author": author,
                    "subject": subject,
                    "session": session.strip() or None,
                    "unit": int(unit) if unit.strip().isdigit() else None,
                    "tool": tool.strip() or None,
                }
            )
        return commits

    def person(self) -> Identity:
        """The person's git identity (their config, as ``git var`` tells it; asked once per ``Repo``), or
        ``FALLBACK_PERSON`` when they set none: they own the repository, so they commit what kms commits."""
        if self._person is None:
            try:
                ident = self.text("var", "GIT_COMMITTER_IDENT")
                m = re.match(r"(.*) <(.*)> \d+ [+-]\d{4}$", ident)
                self._person = Identity(m.group(1), m.group(2)) if m else FALLBACK_PERSON
            except GitError:
                self._person = FALLBACK_PERSON
        return self._person


def open_repo(folder: Path) -> Repo:
    """The git work tree ``folder`` is in; ``NotARepo`` when it is in none (or is inside ``.git``)."""
    probe = Repo(folder, folder, "sha1", "")
    try:
        out = probe.out(
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-dir",
            "--show-object-format",
            "--git-common-dir",
        )
    except GitFailed as e:
        raise NotARepo(f"{folder} is not in a git work tree: {e.stderr[-200:]}") from None
    lines = os.fsdecode(out).splitlines()
    if len(lines) < 4:
        raise NotARepo(f"{folder} is not in a git work tree (a bare repository or inside .git)")
    top, git_dir, fmt, common = Path(lines[0]), Path(lines[1]), lines[2].strip(), Path(lines[3])
    real = folder.resolve()
    prefix = "" if real == top.resolve() else real.relative_to(top.resolve()).as_posix()
    return Repo(top, git_dir, fmt, prefix, common)


def quote_fi(path: str) -> bytes:
    """A path as ``git fast-import`` reads it: as is, or C-quoted when it must be (a newline, a leading
    quote); any other byte goes through unchanged."""
    raw = fs(path)
    if b"\n" not in raw and not raw.startswith(b'"') and b"\\" not in raw[:1]:
        return raw
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'


def note_commits(vault: Any, path: str, limit: int = 50) -> list[dict[str, Any]] | None:
    """The commits of a note of a vault in git mode (``Repo.path_log``); None for a vault not in git mode,
    [] when git cannot tell (the folder left its repository)."""
    if getattr(vault, "git_mode", "off") == "off":
        return None
    try:
        repo = open_repo(vault.root)
        return repo.path_log(repo.path_of(path), limit)
    except GitError:
        return []
