"""Git mode ``sync``: the branch of a vault kept level with its upstream, without ever rewriting what the
person has not committed or merging into a checkout by hand.

``sync(conn, vault)`` does, in this order (each step's failure is the vault's git state, ``server.vault.
git_state``, shown by ``kms status`` and ``kms doctor``; nothing is ever silent):

1. **fetch** the upstream (the branch's ``@{upstream}``, else ``origin``'s branch of the same name);
2. **behind**: fast-forward. The tree moves with ``git read-tree -m -u`` (a two-way merge of HEAD's tree into
   the new one: it refuses, changing nothing, when a file it would overwrite holds the person's uncommitted
   edits), then the branch with a compare-and-swap;
3. **diverged**: the merge is computed off the working tree (``git merge-tree --write-tree``, git ≥ 2.38).
   Conflicts in a memory note (``memory.folder``) are merged by union (``git merge-file --union``: both
   sides' facts kept), since a memory note is a list every machine appends to. Clean: a merge commit
   (the person's identity; ``Kms-Merge`` trailer) and the tree moves as in 2. Conflicting: HEAD and
   every file are left untouched, and each conflicting note opens one conflict item (``server.index.
   conflicts``, ``source="git-merge"``, with mine, theirs and base), once. Once the person resolved it
   (``conflicts.resolve``: ``mine``/``keep-mine``, ``theirs``/``keep-theirs``, or anything else: the note
   as they left it in the work tree), the next sync merges with that version of the note, as long as the
   upstream still holds the ``theirs`` they decided on;
4. **push**, only when asked (``push=True``: the service's idle job, ``start_sync_if_due``): a push the
   remote refuses is kept as the vault's push error, with how many commits wait.

The watcher steps aside while the tree moves (``own_writes``: this process's watcher waits), and the files
that changed are then indexed (``index_vault``, incremental), so search follows the merge at once.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from server.config.schema import SETTINGS
from server.config.settings import default_config_path, load_settings
from server.index import conflicts
from server.index.indexer import index_vault
from server.store.db import connect, scalar
from server.store.locks import lock_file, own_writes
from server.vault import git_state, git_units
from server.vault.git import GitError, GitFailed, Identity, NotARepo, Repo, open_repo, split_z
from server.vault.paths import is_note_path
from server.vault.registry import Vault, list_vaults

log = logging.getLogger("kms.git")

DEFAULT_MEMORY_FOLDER = "kms-memory"


@dataclass(frozen=True)
class SyncTimings:
    """The sync timings of this machine's settings (defined, with their defaults, in ``server.config``):
    how often the service syncs a vault in git mode ``sync`` (``sync.git_every``), once no agent write was
    made for how long (``sync.git_quiet``: pushes wait for a quiet moment), and how long, at most, the
    watcher steps aside while this process rewrites the tree (``sync.watcher_step_aside``)."""

    every_s: float
    quiet_s: float
    step_aside_s: float


def sync_timings() -> SyncTimings:
    """This machine's ``SyncTimings``, read from its settings file each time (a change applies at the
    watcher's next look, within seconds); an unreadable file gives the defaults."""
    keys = ("sync.git_every", "sync.git_quiet", "sync.watcher_step_aside")
    try:
        found = load_settings(default_config_path(), env={}, has_vault=True)
        values = [found.get(k) for k in keys]
    except Exception:  # an unreadable settings file: the defaults
        values = [SETTINGS[k].default for k in keys]
    return SyncTimings(*(float(v) for v in values))


@dataclass
class SyncReport:
    """What one sync did."""

    vault: str
    fetched: bool = False
    action: str = "none"  # none, fast-forward, merged, conflicted, blocked, ahead
    head: str | None = None
    changed: list[str] = field(default_factory=list)  # vault-relative paths the tree move changed
    conflicts: list[str] = field(default_factory=list)  # vault-relative paths with a conflict item
    pushed: bool | None = None  # None: not asked
    error: str | None = None


def _memory_folder() -> str:
    try:
        folder = load_settings(default_config_path(), env={}, has_vault=True).get("memory.folder")
    except Exception:  # an unreadable settings file: the default
        return DEFAULT_MEMORY_FOLDER
    return str(folder or DEFAULT_MEMORY_FOLDER)


def upstream(repo: Repo, branch: str) -> tuple[str, str]:
    """(remote, the remote-tracking ref) the branch syncs with."""
    short = branch.removeprefix("refs/heads/")
    remote = repo.run("config", "--get", f"branch.{short}.remote", ok=(0, 1)).stdout.decode().strip() or "origin"
    merge = repo.run("config", "--get", f"branch.{short}.merge", ok=(0, 1)).stdout.decode().strip() or branch
    return remote, f"refs/remotes/{remote}/{merge.removeprefix('refs/heads/')}"


def _rev(repo: Repo, ref: str) -> str | None:
    out = repo.run("rev-parse", "-q", "--verify", f"{ref}^{{commit}}", ok=(0, 1)).stdout
    return os.fsdecode(out).strip() or None


def sync(conn: apsw.Connection, vault: Vault, *, push: bool = False, identity: Identity | None = None) -> SyncReport:
    """Fetch, then fast-forward or merge (see the module docstring); push when ``push``. One sync per vault at a
    time, whatever the process (a lock file beside the repository's git folder)."""
    report = SyncReport(vault.name)
    try:
        repo = open_repo(vault.root)
    except NotARepo as e:
        git_state.note(conn, vault.id, fetch_error=str(e))
        report.error = str(e)
        return report
    with lock_file(repo.git_dir / "kms-sync.lock"):
        try:
            git_units.drain(conn, vault.id)  # every unit this machine made is a commit before anything moves
            _sync(conn, vault, repo, report, identity or repo.person())
            if push and report.action not in ("conflicted", "blocked") and report.error is None:
                _push(conn, vault, repo, report)  # (a branch that did not take the upstream in would be refused)
        except GitError as e:
            report.error = str(e)
            log.warning("git sync of vault %s: %s", vault.name, e)
    return report


def _sync(conn: apsw.Connection, vault: Vault, repo: Repo, report: SyncReport, me: Identity) -> None:
    branch, head = repo.head()
    if branch is None or head is None:
        git_state.note(conn, vault.id, fetch_error="HEAD is detached or has no commit: nothing to sync")
        return
    remote, tracking = upstream(repo, branch)
    try:
        repo.run("fetch", "--quiet", "--no-tags", remote, write=True)
    except GitError as e:
        git_state.note(conn, vault.id, fetch_error=str(e)[-1000:])
        report.error = str(e)
        return
    git_state.note(conn, vault.id, fetched_at=time.time(), fetch_error=None)
    report.fetched = True
    theirs = _rev(repo, tracking)
    report.head = head
    if theirs is None or theirs == head:
        return
    base = repo.run("merge-base", head, theirs, ok=(0, 1)).stdout.decode().strip() or None
    if base == theirs:
        report.action = "ahead"
        return
    if base == head:
        _move(conn, vault, repo, report, branch, head, theirs, f"{theirs}^{{tree}}", "fast-forward")
        return
    merged = repo.run("merge-tree", "--write-tree", "-z", "--name-only", head, theirs, ok=(0, 1))
    fields = merged.stdout.split(b"\0")
    tree = fields[0].decode().strip()
    conflicted = sorted({os.fsdecode(f) for f in fields[1 : fields.index(b"", 1)]}) if merged.returncode else []
    settled: dict[str, bytes | None] = {}
    if conflicted:
        tree, conflicted, settled = _settle(conn, vault, repo, tree, conflicted, base, head, theirs)
    if conflicted:
        _open_conflicts(conn, vault, repo, report, conflicted, base, head, theirs)
        return
    commit = _merge_commit(repo, tree, head, theirs, me)
    _move(conn, vault, repo, report, branch, head, commit, tree, "merged", _as_left(repo, settled))


def _move(
    conn: apsw.Connection,
    vault: Vault,
    repo: Repo,
    report: SyncReport,
    branch: str,
    head: str,
    new: str,
    tree: str,
    action: str,
    as_left: bytes = b"",
) -> None:
    """Move the work tree, then the branch, from ``head`` to ``new`` (whose tree is ``tree``); the watcher waits,
    and the changed notes are indexed after. ``as_left``: index entries (``--index-info``) of notes the person
    resolved by editing them, already as the merge has them (else their edit would block the move)."""
    names = split_z(repo.out("diff-tree", "-r", "-z", "--name-only", "--no-renames", head, tree))
    with own_writes():
        repo.run("update-index", "-q", "--refresh", ok=(0, 1), write=True)
        if as_left:
            repo.run("update-index", "-z", "--index-info", stdin=as_left, write=True)
        try:
            repo.run("read-tree", "-m", "-u", head, tree, write=True)
        except GitFailed as e:  # the person's uncommitted edits are in the way: nothing was changed
            report.action = "blocked"
            git_state.note(conn, vault.id, merge_error=f"uncommitted edits block the update: {e.stderr[-500:]}")
            return
        repo.run("update-ref", "-m", f"kms: {action}", branch, new, head, write=True)
    changed = [rel for n in names if (rel := repo.vault_rel(n)) is not None]
    report.action, report.head, report.changed = action, new, changed
    git_state.note(conn, vault.id, merged_at=time.time(), merge_error=None)
    if changed:  # (a rename is told by content, as the watcher's scan tells it: the note keeps its id)
        index_vault(conn, vault, how="watch")


def _merge_commit(repo: Repo, tree: str, head: str, theirs: str, me: Identity) -> str:
    env = {
        "GIT_AUTHOR_NAME": me.name,
        "GIT_AUTHOR_EMAIL": me.email,
        "GIT_COMMITTER_NAME": me.name,
        "GIT_COMMITTER_EMAIL": me.email,
    }
    message = b"Merge the upstream branch (kms sync)\n\nKms-Merge: git merge-tree\n"
    return repo.text("commit-tree", tree, "-p", head, "-p", theirs, stdin=message, env=env)


def _blob_at(repo: Repo, rev: str | None, path: str) -> bytes | None:
    if rev is None:
        return None
    found = repo.entries(rev, [path])
    return repo.blob(found[path].oid) if path in found else None


def _as_left(repo: Repo, settled: dict[str, bytes | None]) -> bytes:
    """Index entries of the settled notes whose file already holds what the merge gives them."""
    out = b""
    for path, data in settled.items():
        try:
            now = (repo.top / path).read_bytes()
        except FileNotFoundError:
            continue
        if data is not None and now == data:
            out += f"100644 {repo.blob_id(data)}\t".encode() + os.fsencode(path) + b"\0"
    return out


def _settle(
    conn: apsw.Connection,
    vault: Vault,
    repo: Repo,
    tree: str,
    conflicted: list[str],
    base: str | None,
    head: str,
    theirs: str,
) -> tuple[str, list[str], dict[str, bytes | None]]:
    """Settle what kms may settle of a conflicting merge: a memory note by union (``git merge-file --union``:
    both sides' facts), and a note whose conflict item the person resolved for this very upstream version
    (``RESOLUTIONS``); (the tree with those settled, the conflicts left, the settled notes' bytes)."""
    folder = repo.path_of(_memory_folder()) + "/"
    settled: dict[str, bytes | None] = {}
    with tempfile.TemporaryDirectory(prefix="kms-merge-") as tmp:
        for path in conflicted:
            sides = [_blob_at(repo, rev, path) for rev in (head, base, theirs)]
            decided = _decided(conn, vault, repo, path, sides[0], sides[2])
            if decided is not None:
                settled[path] = decided[0]
            elif path.startswith(folder) and is_note_path(path) and sides[0] is not None and sides[2] is not None:
                files = []
                for i, data in enumerate(sides):
                    f = Path(tmp) / f"{i}"
                    f.write_bytes(data or b"")
                    files.append(str(f))
                settled[path] = repo.out("merge-file", "-p", "--union", *files, ok=range(0, 128))
        if not settled:
            return tree, conflicted, settled
        entries = [
            b"0 " + repo.zero_oid.encode() + b"\t" + os.fsencode(p) + b"\0"
            if data is None
            else f"100644 {repo.write_blob(data)}\t".encode() + os.fsencode(p) + b"\0"
            for p, data in settled.items()
        ]
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        repo.run("read-tree", tree, env=env)
        repo.run("update-index", "-z", "--index-info", stdin=b"".join(entries), env=env)
        tree = repo.text("write-tree", env=env)
    return tree, [p for p in conflicted if p not in settled], settled


RESOLUTIONS = {"mine": "mine", "keep-mine": "mine", "theirs": "theirs", "keep-theirs": "theirs"}  # else: the file


def _decided(
    conn: apsw.Connection, vault: Vault, repo: Repo, path: str, mine: bytes | None, theirs: bytes | None
) -> tuple[bytes | None] | None:
    """The person's decision on this note's git-merge conflict, for this upstream version (its ``theirs``): mine,
    theirs, or (an edit, keep both) the file as it is now; None while nothing was decided."""
    rel = repo.vault_rel(path)
    found = conn.execute(
        "SELECT resolution, theirs FROM conflicts WHERE vault_id = ? AND path = ? AND source = 'git-merge' "
        "AND resolved_at IS NOT NULL ORDER BY resolved_at DESC LIMIT 1",
        (vault.id, rel),
    ).fetchall()
    if not found or found[0][1] != theirs:
        return None
    how = RESOLUTIONS.get(str(found[0][0]).strip().lower())
    if how == "mine":
        return (mine,)
    if how == "theirs":
        return (theirs,)
    try:
        return ((repo.top / path).read_bytes(),)
    except FileNotFoundError:
        return (None,)


def _open_conflicts(
    conn: apsw.Connection,
    vault: Vault,
    repo: Repo,
    report: SyncReport,
    paths: list[str],
    base: str | None,
    head: str,
    theirs: str,
) -> None:
    """A merge that does not merge cleanly: HEAD and the files stay; each note gets one open conflict item."""
    report.action = "conflicted"
    for path in paths:
        rel = repo.vault_rel(path)
        if rel is None:
            continue
        report.conflicts.append(rel)
        if conflicts.open_for(conn, vault.id, rel) is None:
            conflicts.open_conflict(
                conn,
                vault_id=vault.id,
                path=rel,
                source="git-merge",
                mine=_blob_at(repo, head, path),
                theirs=_blob_at(repo, theirs, path),
                base=_blob_at(repo, base, path),
            )
    git_state.note(
        conn, vault.id, merge_error=f"the upstream branch does not merge cleanly: {len(paths)} conflicting note(s)"
    )


def _push(conn: apsw.Connection, vault: Vault, repo: Repo, report: SyncReport) -> None:
    branch, head = repo.head()
    if branch is None or head is None:
        return
    remote, tracking = upstream(repo, branch)
    theirs = _rev(repo, tracking)
    ahead = int(repo.text("rev-list", "--count", head if theirs is None else f"{theirs}..{head}"))
    if ahead == 0:
        report.pushed = True
        return
    short = branch.removeprefix("refs/heads/")
    try:
        repo.run("push", "--porcelain", "--quiet", remote, f"{branch}:refs/heads/{short}")
    except GitFailed as e:
        report.pushed = False
        git_state.push_failed(conn, vault.id, e.stderr or str(e), ahead)
        log.warning("git push of vault %s refused: %s", vault.name, e.stderr[-300:])
        return
    report.pushed = True
    git_state.pushed(conn, vault.id)


# ----- the service's idle job ----------------------------------------------------------------------------

_running: dict[str, threading.Thread] = {}
_last: dict[str, float] = {}
_guard = threading.Lock()


def due(conn: apsw.Connection, key: str, now: float, every_s: float, idle_s: float) -> bool:
    """Whether a sync should start now: not one in the last ``every_s``, and no agent write in the last ``idle_s``
    (a push waits for a quiet moment; a write's commit is never pushed in the middle of a burst)."""
    if now - _last.get(key, 0.0) < every_s:
        return False
    last_write = scalar(conn, "SELECT max(at) FROM tool_invocations")
    return last_write is None or time.time() - float(last_write) >= idle_s


def start_sync_if_due(
    db_path: str | Path,
    *,
    every_s: float | None = None,
    idle_s: float | None = None,
    now: Callable[[], float] = time.monotonic,
) -> threading.Thread | None:
    """Sync (and push) every vault in git mode ``sync``, on a thread of its own, when ``due``, and commit the
    units a process that died left (any vault in git mode) whenever there are some; the thread. ``every_s``
    and ``idle_s``: the settings' (``sync_timings``) unless given."""
    key = str(db_path)
    with _guard:
        running = _running.get(key)
        if running is not None and running.is_alive():
            return None
        try:
            conn = connect(db_path)
            try:
                syncing = any(v.git_mode == "sync" for v in list_vaults(conn))
                left = git_units.pending(conn) > 0  # units a process that died left uncommitted
                if syncing and (every_s is None or idle_s is None):
                    timings = sync_timings()
                    every_s = timings.every_s if every_s is None else every_s
                    idle_s = timings.quiet_s if idle_s is None else idle_s
                syncing = syncing and due(conn, key, now(), every_s or 0.0, idle_s or 0.0)
                if not (left or syncing):
                    return None
            finally:
                conn.close()
        except Exception:  # (the database busy or gone from under a watcher): the watcher keeps watching
            log.exception("checking whether a git sync is due failed")
            return None
        if syncing:
            _last[key] = now()
        thread = threading.Thread(target=_sync_all, args=(db_path, syncing), name="kms-git-sync", daemon=True)
        _running[key] = thread
        thread.start()
        return thread


def _sync_all(db_path: str | Path, syncing: bool) -> None:

    conn = connect(db_path)
    try:
        git_units.drain(conn)  # (every vault in git mode, ``commit`` ones too)
        for vault in list_vaults(conn) if syncing else []:
            if vault.git_mode == "sync":
                sync(conn, vault, push=True)
    except Exception:
        log.exception("git sync failed")
    finally:
        conn.close()
