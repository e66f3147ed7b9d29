"""Git mode: every agent write unit is one commit holding only that unit's paths.

A vault in git mode (``kms vault add PATH --git commit|sync``, ``kms vault set NAME git=…``; m054) gets, after
each write unit the guard records (one tool call; a rename with its link rewrites is one unit), one commit:

- **Only the unit's paths.** The commit is built with ``git fast-import`` from HEAD's tree and the unit's own
  bytes (the bytes kms wrote, not what the file holds a moment later), so the person's staged index and
  their other edits are never swept in; no pathspec is ever globbed. fast-import moves the branch only if
  its tip is still the commit the unit was built on: a commit the person made meanwhile is never lost (the
  unit is built again on it). Their index is then given the committed entries for those paths only, as
  ``git commit --only PATHS`` does, so ``git status`` shows no phantom change.
- **The person's checkpoint first.** A file the unit changed whose bytes before the write differ from what
  HEAD holds carried uncommitted edits of the person: those bytes are committed first, authored by the
  person (their git identity), and the agent's commit follows. Reverting the agent's commit then never
  loses the person's text.
- **Who.** The agent's commit is authored as the session's principal via kms (``agent_identity``) and
  committed as the person (who owns the repository), with trailers naming the unit (the provenance row),
  session, tool and approver. The person's own writes through kms (``kms revert``, ``kms restore``, a trash
  restore, a conflict's resolution: ``server.writes.person``) are units too, authored as the person
  (``PERSON``, session ``person``, approver ``person``).
- **When: after the answer, never lost.** Inside the answer, ``enqueue`` only puts the unit's bytes into the
  repository's objects (``Repo.write_blob``: no process) and one ``git_pending`` row (m055) into the
  database: well under a millisecond. The commit itself (a few git processes: 15-150 ms on a loaded 2-core
  machine at 10k notes, ``bench/bench_git.py``) is made by this process's committer thread, in unit order (a
  process that exits waits up to ``EXIT_WAIT_S`` for the commits it owes).
  A process that dies first leaves the row: the next ``drain`` (the next unit, the sync job, any kms
  process) commits it. A blob lost with the machine's power falls back to the file's bytes now.
- **Never the answer's failure.** A commit that fails (a locked index past the wait, a detached HEAD, git
  gone) is logged and kept as the vault's git state (``server.vault.git_state``), shown by ``kms status``
  and ``kms doctor``; the row stays to be tried again.

Files under the vault's ``.trash/`` are not committed: a note moved there is committed as deleted. A new file
the person's ``.gitignore`` rules ignore is not committed either (a tracked file always is).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import apsw

from server.store.db import connect, rows, write_tx
from server.store.locks import lock_file
from server.vault import git_state
from server.vault.git import Entry, GitError, GitFailed, Identity, Repo, open_repo, quote_fi, split_z
from server.vault.paths import TRASH
from server.vault.registry import Vault, get_vault

log = logging.getLogger("kms.git")

CR = "cr"  # a git_pending file's flag: its bytes hold a carriage return (line endings git may convert)
ATTEMPTS = 3  # the branch moved under a unit (the person committed): built again on the new HEAD
File = tuple[str, bytes | None, bytes | None]  # vault-relative path, bytes before, bytes after (None: absent)
Net = dict[str, tuple[str | None, str | None]]  # work-tree path -> (blob before, blob after); None: absent


@dataclass(frozen=True)
class Unit:
    """One agent write unit, as its commit names it."""

    invocation_id: int
    session_id: str
    tool: str
    approver: str  # "none" (no approval asked), or how the person approved it
    author: Identity  # the session's principal, via kms; ``PERSON``: the person (their git identity)


PERSON = Identity("", "")  # a unit of the person's own (a revert, a restore): authored as their git identity
PERSON_APPROVER = "person"  # the approver a unit of the person's own names (they need no approval)


def agent_identity(session_id: str, principal: str | None) -> Identity:
    """The author of a session's commits: its principal (a project, a token's label) via kms, and an address
    naming the session (never an address of the person's)."""
    who = os.path.basename((principal or "").strip().rstrip("/\\")) or "agent"  # a project is often its folder
    local = re.sub(r"[^A-Za-z0-9._-]+", "-", session_id)[:64] or "session"
    return Identity(f"{who} via kms", f"{local}@kms.invalid")


_repos: dict[str, Repo] = {}


def repo_for(vault: Vault) -> Repo:
    """The work tree of a vault (looked up once a process; ``NotARepo`` when the folder is in none)."""
    key = str(vault.root)
    if key not in _repos:
        _repos[key] = open_repo(vault.root)
    return _repos[key]


# ----- inside the answer ---------------------------------------------------------------------------------


def enqueue(conn: apsw.Connection, vault: Vault, files: list[File], unit: Unit) -> bool:
    """Keep a unit of a vault in git mode to be committed: its bytes as blobs, one ``git_pending`` row; the
    committer thread is woken. False (and the vault's git state says why) when it could not be kept."""
    try:
        repo = repo_for(vault)
        net: dict[str, list[str | None]] = {}
        for path, before, after in files:
            if path == TRASH or path.startswith(TRASH + "/"):
                continue
            b = None if before is None else repo.write_blob(before)
            a = None if after is None else repo.write_blob(after)
            if path in net:  # a file written twice in one unit: its first bytes and its last
                net[path][1] = a
            else:
                net[path] = [b, a]
            if (before is not None and b"\r" in before) or (after is not None and b"\r" in after):
                net[path].append(CR)  # git may store it otherwise (line endings): asked at the commit
    except (GitError, OSError) as e:
        _repos.pop(str(vault.root), None)
        git_state.note(conn, vault.id, commit_error=f"unit #{unit.invocation_id}: {e}"[-1000:])
        return False
    if not net:
        return True
    with write_tx(conn):
        conn.execute(
            "INSERT INTO git_pending(vault_id, invocation_id, session_id, tool, approver, author_name, "
            "author_email, files, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                vault.id,
                unit.invocation_id,
                unit.session_id,
                unit.tool,
                unit.approver,
                unit.author.name,
                unit.author.email,
                json.dumps([[p, *ba] for p, ba in net.items()], ensure_ascii=False),
                time.time(),
            ),
        )
    _committer(conn.filename).wake()
    return True


# ----- after it ------------------------------------------------------------------------------------------


def pending(conn: apsw.Connection, vault_id: int | None = None) -> int:
    """How many units wait for their commit."""
    found = rows(conn, "SELECT count(*) AS n FROM git_pending WHERE ? IS NULL OR vault_id = ?", (vault_id, vault_id))
    return int(found[0]["n"])


def drain(conn: apsw.Connection, vault_id: int | None = None) -> int:
    """Commit every waiting unit (of one vault, or all), oldest first, one vault's units under its lock (any
    process may drain); how many were committed. A unit that fails stays, and its vault's later units wait
    behind it (their commits must follow it)."""
    done = 0
    waiting = rows(
        conn,
        "SELECT DISTINCT vault_id FROM git_pending WHERE ? IS NULL OR vault_id = ? ORDER BY vault_id",
        (vault_id, vault_id),
    )
    for v in waiting:
        try:
            vault = get_vault(conn, v["vault_id"])
        except Exception:  # the vault was removed: its units go with it
            with write_tx(conn):
                conn.execute("DELETE FROM git_pending WHERE vault_id = ?", (v["vault_id"],))
            continue
        done += _drain_vault(conn, vault)
    return done


def _drain_vault(conn: apsw.Connection, vault: Vault) -> int:
    if vault.git_mode == "off":
        with write_tx(conn):  # git mode was turned off: nothing of it is committed any more
            conn.execute("DELETE FROM git_pending WHERE vault_id = ?", (vault.id,))
        return 0
    try:
        repo = repo_for(vault)
    except GitError as e:
        git_state.note(conn, vault.id, commit_error=str(e)[-1000:])
        return 0
    done = 0
    with lock_file(repo.common_dir / "kms-commit.lock"):
        for row in rows(conn, "SELECT * FROM git_pending WHERE vault_id = ? ORDER BY id", (vault.id,)):
            unit = Unit(
                row["invocation_id"],
                row["session_id"],
                row["tool"],
                row["approver"],
                Identity(row["author_name"], row["author_email"]) if row["author_name"] else repo.person(),
            )
            net: Net = {}
            cr: set[str] = set()
            for p, b, a, *flags in json.loads(row["files"]):
                net[repo.path_of(p)] = (b, a)
                if CR in flags:
                    cr.add(repo.path_of(p))
            try:
                commit_files(repo, net, unit, cr)
            except GitError as e:
                _repos.pop(str(vault.root), None)
                log.warning("git: could not commit unit #%s in vault %s: %s", unit.invocation_id, vault.name, e)
                git_state.note(conn, vault.id, commit_error=f"unit #{unit.invocation_id}: {e}"[-1000:])
                return done
            with write_tx(conn):
                conn.execute("DELETE FROM git_pending WHERE id = ?", (row["id"],))
            git_state.note(conn, vault.id, committed_at=time.time(), commit_error=None)
            done += 1
    return done


def commit_files(repo: Repo, net: Net, unit: Unit, cr: Collection[str] = ()) -> str | None:
    """The person's checkpoint (when a file held uncommitted edits) and the unit's commit, on HEAD's branch;
    the new HEAD (None: nothing to commit, e.g. a unit committed already by a process that died after).
    ``cr``: the paths whose bytes hold a carriage return, stored as git stores them (``_as_git_stores``)."""
    net = {p: (b if b is None or repo.has_object(b) else "lost", _after(repo, p, a)) for p, (b, a) in net.items()}
    for p in cr:
        if p in net:
            net[p] = (_as_git_stores(repo, p, net[p][0]), _as_git_stores(repo, p, net[p][1]))
    for _attempt in range(ATTEMPTS):
        branch, head = repo.head()
        if branch is None:
            raise GitError("HEAD is detached: kms commits a unit only onto a branch")
        have = repo.entries(head, sorted(net)) if head else {}
        ignored = _ignored(repo, [p for p in net if p not in have])
        net = {p: ba for p, ba in net.items() if p not in ignored}
        now = {p: (have[p].oid if p in have else None) for p in net}
        checkpoint = {p: b for p, (b, _a) in net.items() if b != "lost" and b != now[p]}
        base = {p: checkpoint.get(p, now[p]) for p in net}
        agent = {p: a for p, (_b, a) in net.items() if a != base[p]}
        if not agent and not checkpoint:  # committed already (a process died before its index update)
            if net:
                _stage_committed(repo, have, {p: a for p, (_b, a) in net.items() if a == now[p]})
            return None
        try:
            new = _fast_import(repo, branch, head, have, checkpoint, agent, unit)
        except GitFailed as e:
            if "Not updating" in e.stderr:
                continue  # the branch moved under us (the person committed): built again on its new tip
            raise
        _stage_committed(repo, have, {p: a for p, (_b, a) in net.items()})
        return new
    raise GitError(f"the branch kept moving while unit #{unit.invocation_id} was committed")


def _as_git_stores(repo: Repo, path: str, oid: str | None) -> str | None:
    """The blob git stores for these bytes at ``path`` (``Repo.stored_blob``: a ``core.autocrlf`` repository
    keeps LF): kms's commit is then what ``git add`` would have made, so ``git status`` shows it clean, and
    the person's bytes before the write, CRLF in their work tree, are no uncommitted edit to checkpoint."""
    if oid is None or oid == "lost":
        return oid
    return repo.stored_blob(path, repo.blob(oid))


def _ignored(repo: Repo, new: list[str]) -> set[str]:
    """The new paths the person's ``.gitignore`` rules keep out of git (a tracked file is never ignored)."""
    if not new:
        return set()
    listed = b"".join(os.fsencode(p) + b"\0" for p in new)  # (check-ignore takes paths, never pathspec magic)
    out = repo.out("check-ignore", "-z", "--stdin", stdin=listed, ok=(0, 1), env={"GIT_LITERAL_PATHSPECS": "0"})
    return set(split_z(out))


def _after(repo: Repo, path: str, oid: str | None) -> str | None:
    """The unit's bytes after it; when that blob was lost (a power cut before it reached the disk), the file's
    bytes now (they hold the unit's change or a later one; nothing of the unit is lost)."""
    if oid is None or repo.has_object(oid):
        return oid
    try:
        return repo.write_blob((repo.top / path).read_bytes())
    except FileNotFoundError:
        return None


def _message(title: str, trailers: list[tuple[str, str]]) -> bytes:
    body = title.strip() + "\n\n" + "".join(f"{k}: {v}\n" for k, v in trailers)
    return body.encode("utf-8", "surrogateescape")


def _describe(unit: Unit, paths: list[str]) -> str:
    shown = ", ".join(os.path.basename(p).replace("\n", " ") for p in paths[:3])
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return f"{unit.tool}: {shown}{more}"


def _mode(have: dict[str, Entry], path: str) -> str:
    return have[path].mode if path in have and have[path].mode in ("100644", "100755") else "100644"


def _commit_block(
    ref: str,
    mark: int,
    author: Identity,
    committer: Identity,
    message: bytes,
    parent: str | None,
    files: dict[str, str | None],
    have: dict[str, Entry],
    when: float,
) -> bytes:
    out = [
        f"commit {ref}\nmark :{mark}\n".encode(),
        b"author " + author.line(when) + b"\n",
        b"committer " + committer.line(when) + b"\n",
        b"data %d\n" % len(message) + message + b"\n",
    ]
    if parent:
        out.append(f"from {parent}\n".encode())
    for path, oid in sorted(files.items()):
        if oid is None:
            out.append(b"D " + quote_fi(path) + b"\n")
        else:
            out.append(f"M {_mode(have, path)} {oid} ".encode() + quote_fi(path) + b"\n")
    return b"".join(out)


def _fast_import(
    repo: Repo,
    branch: str,
    head: str | None,
    have: dict[str, Entry],
    checkpoint: dict[str, str | None],
    agent: dict[str, str | None],
    unit: Unit,
) -> str:
    """Write the checkpoint (if any) and the unit's commit with one ``git fast-import``; the last one's id."""
    me = repo.person()
    when = time.time()
    stream = [b"feature done\n"]
    parent = head
    mark = 0
    if checkpoint:
        mark += 1
        msg = _message(
            "Checkpoint: the person's uncommitted edits, before "
            + ("their own write through kms" if unit.approver == PERSON_APPROVER else "an agent's change"),
            [("Kms-Checkpoint-For", str(unit.invocation_id))],
        )
        stream.append(_commit_block(branch, mark, me, me, msg, parent, checkpoint, have, when))
        parent = f":{mark}"
    if agent:
        mark += 1
        msg = _message(
            _describe(unit, sorted(agent)),
            [
                ("Kms-Unit", str(unit.invocation_id)),
                ("Kms-Session", unit.session_id),
                ("Kms-Tool", unit.tool),
                ("Kms-Approver", unit.approver),
            ],
        )
        stream.append(_commit_block(branch, mark, unit.author, me, msg, parent, agent, have, when))
    stream.append(f"get-mark :{mark}\ndone\n".encode())
    # the branch is updated by fast-import itself, only if its tip is still an ancestor of the new commit
    # (the person committing meanwhile makes it fail: "Not updating"), under git's own ref lock
    out = repo.out("fast-import", "--quiet", "--date-format=raw", stdin=b"".join(stream), write=True)
    return os.fsdecode(out).split()[-1]


def _stage_committed(repo: Repo, have: dict[str, Entry], files: dict[str, str | None]) -> None:
    """The person's index takes the committed entries of the unit's paths (``git commit --only`` does the
    same), so the commit shows as no staged change; their index entries for other paths stay."""
    lines = []
    for path, oid in files.items():
        if oid is None:
            lines.append(b"0 " + repo.zero_oid.encode() + b"\t" + os.fsencode(path) + b"\0")
        else:
            lines.append(f"{_mode(have, path)} {oid}\t".encode() + os.fsencode(path) + b"\0")
    repo.run("update-index", "-z", "--index-info", stdin=b"".join(lines), write=True)


# ----- the committer thread ------------------------------------------------------------------------------


class Committer:
    """One thread per database and process that drains ``git_pending`` whenever a unit is enqueued."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def wake(self) -> None:
        with self._lock:
            self._idle.clear()
            self._wake.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="kms-git-commit", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        conn = connect(self.db_path)
        try:
            while True:
                self._wake.wait(30.0)
                with self._lock:
                    self._wake.clear()
                try:
                    drain(conn)
                except Exception:
                    log.exception("git: committing the waiting units failed")
                with self._lock:
                    if not self._wake.is_set():
                        self._idle.set()
        finally:
            conn.close()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every unit enqueued so far was tried (True), or ``timeout`` passed (False)."""
        return self._idle.wait(timeout)


_committers: dict[str, Committer] = {}
_committers_lock = threading.Lock()


EXIT_WAIT_S = 10.0  # how long a process that exits waits for the commits it still owes (then the next drain)


def _committer(db_path: str) -> Committer:
    key = str(Path(db_path))
    with _committers_lock:
        if not _committers:
            atexit.register(_finish)  # a CLI write (kms approve of a detached call) ends right after its answer
        if key not in _committers:
            _committers[key] = Committer(key)
        return _committers[key]


def _finish() -> None:
    """At exit: the commits this process owes, made (bounded: what is left is kept in ``git_pending``)."""
    deadline = time.monotonic() + EXIT_WAIT_S
    for committer in list(_committers.values()):
        committer.flush(max(0.0, deadline - time.monotonic()))


def flush(db_path: str | Path, timeout: float = 30.0) -> bool:
    """Wait for this process's committer to commit what it was given (a test, a bench, ``kms`` before it exits)."""
    with contextlib.suppress(KeyError):
        return _committers[str(Path(db_path))].flush(timeout)
    return True
