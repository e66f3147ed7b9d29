"""Git mode: every agent write unit is one commit holding only that unit's paths.

A vault in git mode (``kms vault add PATH --git commit|sync``, ``kms vault set NAME git=…``; m054) gets, after
each write unit the guard records (one tool call; a rename with its link rewrites is one unit), one commit:

- **Only the unit's paths.** The commit is built with ``git fast-import`` from HEAD's tree and the unit's own
  bytes (the bytes kms wrote, not what the file holds a moment later), so the person's staged index and
  their other edits are never swept in; no pathspec is ever globbed. The branch then moves with a
  compare-and-swap (``update-ref NEW OLD``): a commit the person made meanwhile is never lost (the unit is
  built again on it). Their index is then given the committed entries for those paths only, as ``git commit
  --only PATHS`` does, so ``git status`` shows no phantom change.
- **The person's checkpoint first.** A file the unit changed whose bytes before the write differ from what
  HEAD holds carried uncommitted edits of the person: those bytes are committed first, authored by the
  person (their git identity), and the agent's commit follows. Reverting the agent's commit then never
  loses the person's text.
- **Who.** The agent's commit is authored as the session's principal via kms (``Unit.author``) and committed
  as the person (their identity from their git config, who owns the repository), with trailers naming the
  unit (the provenance row), session, tool and approver.
- **When: inside the answer.** A unit's commit is a handful of git processes (``head``, ``ls-tree`` of the
  unit's paths, one ``fast-import``, ``update-ref``, ``update-index``): measured by ``bench/bench_git.py``
  at 10k notes (docs/git.md). A crash between the provenance row and the commit leaves the unit's files
  changed and uncommitted: the next unit on such a file commits them as the person's checkpoint (nothing
  is lost, the attribution is).
- **Never the answer's failure.** The write landed and is recorded: a commit that fails (a locked index
  past the wait, a detached HEAD moving, no git) is logged and kept as the vault's git state
  (``server.vault.git_state``), shown by ``kms status`` and ``kms doctor``.

Files under the vault's ``.trash/`` are not committed: a note moved there is committed as deleted.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass

import apsw

from server.vault import git_state
from server.vault.git import Entry, GitError, Identity, Repo, open_repo, quote_fi
from server.vault.paths import TRASH
from server.vault.registry import Vault
from server.writes.context import Landed

log = logging.getLogger("kms.git")

UNIT_REF = "refs/kms/unit"  # where fast-import leaves a unit's commits before the branch moves to them
ATTEMPTS = 3  # the branch moved under a unit (the person committed): built again on the new HEAD


@dataclass(frozen=True)
class Unit:
    """One agent write unit, as its commit names it."""

    invocation_id: int
    session_id: str
    tool: str
    approver: str  # "none" (no approval asked), or how the person approved it
    author: Identity  # the session's principal, via kms


def agent_identity(session_id: str, principal: str | None) -> Identity:
    """The author of a session's commits: its principal (a project, a token's label) via kms, and an address
    naming the session (never an address of the person's)."""
    who = (principal or "agent").strip() or "agent"
    local = re.sub(r"[^A-Za-z0-9._-]+", "-", session_id)[:64] or "session"
    return Identity(f"{who} via kms", f"{local}@kms.invalid")


_repos: dict[str, Repo] = {}


def repo_for(vault: Vault) -> Repo:
    """The work tree of a vault (looked up once a process; ``NotARepo`` when the folder is in none)."""
    key = str(vault.root)
    if key not in _repos:
        _repos[key] = open_repo(vault.root)
    return _repos[key]


def commit_unit(conn: apsw.Connection, landed: list[Landed], unit: Unit) -> list[str]:
    """Commit what the unit changed in each vault in git mode (the commits made, newest last). Never raises: a
    failure is logged and kept in the vault's git state."""
    by_vault: dict[int, tuple[Vault, list[Landed]]] = {}
    for f in landed:
        if f.vault.git_mode in ("commit", "sync"):
            by_vault.setdefault(f.vault.id, (f.vault, []))[1].append(f)
    made: list[str] = []
    for vault, files in by_vault.values():
        try:
            oid = commit_files(repo_for(vault), _net(files), unit)
        except GitError as e:
            _repos.pop(str(vault.root), None)
            log.warning("git: could not commit unit #%s in vault %s: %s", unit.invocation_id, vault.name, e)
            git_state.note(conn, vault.id, commit_error=f"unit #{unit.invocation_id}: {e}"[-1000:])
            continue
        if oid is not None:
            made.append(oid)
            git_state.note(conn, vault.id, committed_at=time.time(), commit_error=None)
    return made


def _net(files: list[Landed]) -> dict[str, tuple[bytes | None, bytes | None]]:
    """Each path's bytes before the unit and after it (a file written twice in one unit: first and last);
    the vault's trash left out."""
    net: dict[str, tuple[bytes | None, bytes | None]] = {}
    for f in files:
        if f.path == TRASH or f.path.startswith(TRASH + "/"):
            continue
        first = net[f.path][0] if f.path in net else f.before
        net[f.path] = (first, f.after)
    return net


def commit_files(repo: Repo, net: dict[str, tuple[bytes | None, bytes | None]], unit: Unit) -> str | None:
    """The person's checkpoint (when a file held uncommitted edits) and the unit's commit, on HEAD; the new
    HEAD (None: nothing to commit)."""
    paths = {repo.path_of(rel): ba for rel, ba in net.items()}
    for _attempt in range(ATTEMPTS):
        branch, head = repo.head()
        have = repo.entries(head, sorted(paths)) if head else {}
        checkpoint = {
            p: before
            for p, (before, _after) in paths.items()
            if _oid(repo, before) != (have[p].oid if p in have else None)
        }
        base = {p: _oid(repo, checkpoint[p]) if p in checkpoint else have[p].oid if p in have else None for p in paths}
        agent = {p: after for p, (_before, after) in paths.items() if _oid(repo, after) != base[p]}
        if not agent and not checkpoint:
            return None
        new = _fast_import(repo, head, have, checkpoint, agent, unit)
        ref = branch or "HEAD"
        try:
            repo.run(
                "update-ref", "-m", f"kms: unit #{unit.invocation_id}", ref, new, head or repo.zero_oid, write=True
            )
        except GitError as e:
            if "cannot lock ref" in str(e) or "but expected" in str(e) or "is at" in str(e):
                continue  # the branch moved under us: built again on its new tip
            raise
        _stage_committed(repo, have, {p: after for p, (_before, after) in paths.items()})
        return new
    raise GitError(f"the branch kept moving while unit #{unit.invocation_id} was committed")


def _oid(repo: Repo, data: bytes | None) -> str | None:
    return None if data is None else repo.blob_id(data)


def _message(title: str, trailers: list[tuple[str, str]]) -> bytes:
    body = title.strip() + "\n\n" + "".join(f"{k}: {v}\n" for k, v in trailers)
    return body.encode("utf-8", "surrogateescape")


def _describe(unit: Unit, paths: list[str]) -> str:
    shown = ", ".join(os.path.basename(p).replace("\n", " ") for p in paths[:3])
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return f"{unit.tool}: {shown}{more}"


def _commit_block(
    mark: int,
    author: Identity,
    committer: Identity,
    message: bytes,
    parent: str | None,
    files: dict[str, bytes | None],
    have: dict[str, Entry],
    when: float,
) -> bytes:
    out = [
        f"commit {UNIT_REF}\nmark :{mark}\n".encode(),
        b"author " + author.line(when) + b"\n",
        b"committer " + committer.line(when) + b"\n",
        b"data %d\n" % len(message) + message + b"\n",
    ]
    if parent:
        out.append(f"from {parent}\n".encode())
    for path, data in sorted(files.items()):
        if data is None:
            out.append(b"D " + quote_fi(path) + b"\n")
        else:
            mode = have[path].mode if path in have and have[path].mode in ("100644", "100755") else "100644"
            out.append(f"M {mode} inline ".encode() + quote_fi(path) + b"\n" + b"data %d\n" % len(data) + data + b"\n")
    return b"".join(out)


def _fast_import(
    repo: Repo,
    head: str | None,
    have: dict[str, Entry],
    checkpoint: dict[str, bytes | None],
    agent: dict[str, bytes | None],
    unit: Unit,
) -> str:
    """Write the checkpoint (if any) and the unit's commit with one ``git fast-import``; the last one's id."""
    me = repo.person()
    when = time.time()
    stream = [b"feature done\n", f"reset {UNIT_REF}\n".encode()]
    if head:
        stream.append(f"from {head}\n".encode())
    stream.append(b"\n")
    parent = head
    mark = 0
    if checkpoint:
        mark += 1
        msg = _message(
            "Checkpoint: the person's uncommitted edits, before an agent's change",
            [("Kms-Checkpoint-For", str(unit.invocation_id))],
        )
        stream.append(_commit_block(mark, me, me, msg, parent, checkpoint, have, when))
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
        stream.append(_commit_block(mark, unit.author, me, msg, parent, agent, have, when))
    stream.append(f"get-mark :{mark}\ndone\n".encode())
    out = repo.out("fast-import", "--quiet", "--force", "--date-format=raw", stdin=b"".join(stream))
    return os.fsdecode(out).split()[-1]


def _stage_committed(repo: Repo, have: dict[str, Entry], files: dict[str, bytes | None]) -> None:
    """The person's index takes the committed entries of the unit's paths (``git commit --only`` does the
    same), so the commit shows as no staged change; their index entries for other paths stay."""
    lines = []
    for path, data in files.items():
        if data is None:
            lines.append(b"0 " + repo.zero_oid.encode() + b"\t" + os.fsencode(path) + b"\0")
        else:
            mode = have[path].mode if path in have and have[path].mode in ("100644", "100755") else "100644"
            lines.append(f"{mode} {repo.blob_id(data)}\t".encode() + os.fsencode(path) + b"\0")
    repo.run("update-index", "-z", "--index-info", stdin=b"".join(lines), write=True)
