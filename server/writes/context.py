"""The write context: everything one write call may reach, in one explicit object.

Every operation (``operations``, ``edits``, ``organize``, ``memory``, ``revert`` ...) takes a
``WriteContext`` as its first argument instead of a connection plus repeated keyword arguments,
and the three places that write a file (``cas.write_note``, ``operations.create``,
``multifile.apply_plans``) read from it:

- **where**: the connection, the session's vault scope, its allowlist, its lock folder (computed
  once, when the context is made);
- **the mode** (``staging``): ``None`` applies the call; a ``Capture`` computes every file's new bytes
  and writes nothing (a preview for the person's approval); an ``Expected`` applies the call but
  only if every file is still what the person was shown and becomes what they approved;
- **put-back**: how to take back each file changed so far, should the database then fail to record
  the call (``undone_unless_recorded``);
- **who**: the calling session, for ``kms_remember``'s identity and the provenance row (``touched``);
- **at most once** (``once_call``): a call with an ``idempotencyKey`` journals its file changes so that
  no crash leaves one landed but unrecorded (``server.writes.once``).

The guard (``server.writes.guard``) builds one per call; a person's revert builds one with
``WriteContext.for_person``. Nothing here is ambient: a caller that wants a preview passes a context
in capture mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import apsw

from server.activity.visits import SessionIdentity
from server.config.allowlist import Allowlist
from server.errors import KmsError
from server.index import conflicts
from server.index.notes import find_note
from server.vault.files import default_lock_dir
from server.vault.paths import TRASH, locate_note, real_relpath
from server.vault.registry import Vault, get_vault, list_vaults
from server.vault.scope import Vaults, VaultScope, resolve
from server.writes.staging import Capture, Expected

log = logging.getLogger("kms.writes")


class ModelSource(Protocol):
    """The process's embedding model, as a write may use it: only once it is loaded, never waiting."""

    def ready_embedder(self) -> Any: ...


def lock_dir_for(conn: apsw.Connection) -> Path:
    """Lock files live next to the database: private to kms, shared by all its processes."""
    name = conn.filename
    return Path(name).parent / "locks" if name and name != ":memory:" else default_lock_dir()


@dataclass(frozen=True)
class NoteRef:
    """The index's view of the note being written."""

    id: str
    vault_id: int
    path: str
    title: str
    folder: str
    size_bytes: int = 0  # as last indexed: an empty file where this is > 0 is probably mid-save


def load_note(conn: apsw.Connection, ref: str, vault_id: Vaults = None) -> tuple[NoteRef, Vault]:
    """The visible note ``ref`` names (id, title or path) and its vault; ``not-found`` otherwise.
    With ``vault_id`` (a session's scope), notes of other vaults are as if absent."""

    if not isinstance(ref, str) or not ref.strip():
        raise KmsError("invalid-input", "noteId is required")
    row = find_note(conn, ref, vault_id=vault_id)
    note = NoteRef(row["id"], row["vault_id"], row["path"], row["title"], row["folder"], row["size_bytes"])
    return note, get_vault(conn, row["vault_id"])


@dataclass
class Touched:
    """The note a call is about, as far as it got (for its provenance row)."""

    note_id: str | None = None
    vault: str | None = None
    path: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class Landed:
    """One file a call changed on disk: its vault, its vault-relative path where it really is, and its bytes
    before and after (None: it did not exist). What a git-mode vault commits (``server.writes.git_step``)."""

    vault: Vault
    path: str
    before: bytes | None
    after: bytes | None


@dataclass
class WriteContext:
    """One write call's reach: see the module docstring. Made per call, never shared between calls."""

    conn: apsw.Connection
    lock_dir: Path
    allowlist: Allowlist = field(default_factory=Allowlist)
    scope: tuple[str, ...] = ()  # the session's vaults (empty: every vault): other vaults' notes do not exist for it
    max_files: int = 50  # write.max_files_per_call
    session_id: str = "person"
    memory_folder: str | None = None  # memory.folder: kms_remember's own allowlist entry
    identity: SessionIdentity | None = None  # who the session works for (kms_remember keys memory on it)
    model: ModelSource | None = None  # the process's model (kms_remember compares by meaning before it writes)
    staging: Capture | Expected | None = None  # None: apply; Capture: preview only; Expected: as approved
    touched: Touched = field(default_factory=Touched)
    extra_slot: Callable[[], Callable[[], None]] | None = None  # one more rate-limit slot; returns its release
    put_back: list[Callable[[], None]] | None = None  # set by ``undone_unless_recorded``
    capture_folder: str | None = None  # capture.folder: where the session note goes (None: capture is off)
    once_call: str | None = None  # a call with an idempotencyKey (``idempotency.call_id``): journaled (``once``)
    located: dict[tuple[int, str], tuple[Path, str]] = field(default_factory=dict)  # ``locate``'s answers
    unconflicted: set[tuple[int, str]] = field(default_factory=set)  # notes ``check_write`` found in no conflict
    landed: list[Landed] = field(default_factory=list)  # the files changed, in order (``Landed``)
    # what the operation wrote, indexed once it returns (``reindex.flush``); None: indexed at once
    index_after: list[Any] | None = None  # ``reindex.Wrote``s and ``reindex.Unit``s
    indexed_hooks: list[Callable[[], None]] = field(default_factory=list)  # ``when_indexed``

    @classmethod
    def for_person(cls, conn: apsw.Connection, **fields: Any) -> WriteContext:
        """A context with no session rules: the person's own changes (a revert, a restore, a CLI write)."""
        return cls(conn, lock_dir_for(conn), **fields)

    @property
    def by_agent(self) -> bool:
        """A session's call (the person's own writes, ``for_person``, are ``session_id`` ``person``)."""
        return self.session_id != "person"

    def but(self, **changes: Any) -> WriteContext:
        """The same call's context with some fields changed (``kms_remember``'s own allowlist)."""
        return dataclasses.replace(self, **changes)

    # ----- the mode ----------------------------------------------------------------------------

    @property
    def capture(self) -> Capture | None:
        """The preview being recorded (the write points then write nothing), else None."""
        return self.staging if isinstance(self.staging, Capture) else None

    def check_approved(
        self, vault: str, path: str, before: bytes | None, after: bytes | None, *, hidden: bool = False
    ) -> None:
        """``conflict`` unless this file is what the person was shown and becomes what they approved;
        nothing to check for a call that needed no approval."""
        if isinstance(self.staging, Expected):
            self.staging.check(vault, path, before, after, hidden=hidden)

    def when_indexed(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once what the call wrote so far is indexed (it wants a new note's id): at once when the
        index follows each write (``index_after`` None), else after the operation (``reindex.flush``)."""
        if self.index_after is None:
            fn()
        else:
            self.indexed_hooks.append(fn)

    def shown(self, vault: str, path: str, before: bytes | None, after: bytes | None) -> bool:
        """A file's change as the mode wants it: in a preview it is recorded for the person and True is
        answered (write nothing); for an approved call it must be exactly what they were shown
        (``check_approved``); else False: write it."""
        if isinstance(self.staging, Capture):
            self.staging.add(vault, path, before, after)
            return True
        self.check_approved(vault, path, before, after)
        return False

    # ----- put-back ----------------------------------------------------------------------------

    def on_unrecorded(self, step: Callable[[], None]) -> None:
        """Register how to take back a file change if the database then cannot record the call."""
        if self.put_back is not None:
            self.put_back.append(step)

    def take_back(self) -> None:
        """The database could not record the call: every file it changed is put back as kms read it (each
        step keeps a newer save of the person's), the last change first."""
        for step in reversed(self.put_back or []):
            try:
                step()
            except Exception:  # the vault's disk may be failing too: say so, go on with the others
                log.exception("could not put a note back after the database failed")

    def wrote(self, wrote: Any, undo: Callable[[], None]) -> bool:
        """A write point's word for a file it changed (``reindex.Wrote``) and how to take that change back
        (``on_unrecorded``). True: kept, to be indexed when the operation returns (``index_after``); False:
        the caller indexes it now (``reindex.note``)."""
        self.on_unrecorded(undo)
        if self.index_after is None:
            return False
        self.index_after.append(wrote)
        return True

    # ----- where a write may land: the one rule -------------------------------------------------

    def locate(self, vault: Vault, relpath: str) -> tuple[Path, str]:
        """Where the note at ``relpath`` really is (``paths.locate_note``: its file, and that file's real path
        in the vault), resolved once a call: the early check and the write asked it twice, a realpath walk
        each time (+0.2 ms an append)."""
        key = (vault.id, relpath)
        if key not in self.located:
            self.located[key] = locate_note(vault.root, relpath)
        return self.located[key]

    def check_write(self, vault: Vault, relpath: str, *, hidden: bool = False, real: str | None = None) -> str:
        """Refuse, before anything is made, a file this call would create, change, move, remove or move to
        (``relpath``, vault-relative) that is outside the session's reach; return where it really is.

        Judged where the file really is (``paths.real_relpath``: symlinks followed through its deepest
        existing ancestor), so ``drafts/portal -> ../archive`` leads nowhere ``drafts`` does not: the place
        must be inside the vault (``invalid-input``), and both the path and its real place must be allowed
        by the allowlist and the token's folders (``folder-denied``; a ``hidden`` note named by its folder
        only). An agent's write to a note with an open conflict is ``conflict``, to a conflict copy's name
        ``invalid-input`` (``conflicts.check_target``). The vault's trash (``.trash/``) is the vault's, not a
        folder of the allowlist: a path there must really be in it. Every write point goes through here
        (``operations.create``, ``cas``'s notes via ``operations.check_note_folder``, ``multifile.apply_plans``)
        and so does every operation's early check. ``real``: the real place already resolved
        (``paths.locate_notes``)."""
        place = real if real is not None else real_relpath(vault.root, relpath, hidden=hidden)
        if self.by_agent and (vault.id, relpath) not in self.unconflicted:  # once a call: its early check and
            conflicts.check_target(self.conn, vault, relpath)  # its write ask of the same note
            self.unconflicted.add((vault.id, relpath))
        if relpath.split("/")[0] == TRASH:
            if place.split("/")[0] != TRASH:
                raise KmsError(
                    "invalid-input", f"the vault's {TRASH} folder leads elsewhere (a symlink); nothing changed"
                )
        elif self.allowlist:
            self.allowlist.check(relpath, hidden=hidden)
            if place != relpath:
                self.allowlist.check(place, hidden=hidden)
        return place

    def place(self, vault: Vault, relpath: str) -> tuple[Path, str]:
        """Where the note at ``relpath`` really is (``locate``), refused unless the session may write it there
        (``check_write``): the one question every write on an existing note asks, before anything is read."""
        real, place = self.locate(vault, relpath)
        self.check_write(vault, relpath, real=place)
        return real, place

    def may_write(self, vault: Vault, relpath: str, *, real: str | None = None) -> bool:
        """``check_write`` as a question (a link rewrite counts the notes it may not change)."""
        try:
            self.check_write(vault, relpath, hidden=True, real=real)
        except KmsError:
            return False
        return True

    # ----- lookups in the session's scope --------------------------------------------------------

    def take_slot(self) -> Callable[[], None]:
        """One more rate-limit slot for a call that writes several notes (``rate-limited`` when none is
        left); returns the function that gives it back should that note not be written."""
        return self.extra_slot() if self.extra_slot is not None else (lambda: None)

    def check_breadth(self, count: int, what: str = "files") -> None:
        """``too-broad`` (before anything is touched) for a call over ``write.max_files_per_call``."""
        if count > self.max_files:
            raise KmsError(
                "too-broad",
                f"this call would touch {count} {what}; at most {self.max_files} per call "
                "(write.max_files_per_call). Nothing was changed.",
                count=count,
                limit=self.max_files,
            )

    def vault_scope(self) -> VaultScope:
        """The session's vaults by id, for a query that narrows by vault (``server.vault.scope``)."""
        return resolve(self.conn, self.scope)

    def note(self, ref: str) -> tuple[NoteRef, Vault]:
        """The note ``ref`` names and its vault; ``not-found`` for a note outside the scope."""
        note, vault = load_note(self.conn, ref, self.vault_scope())  # other vaults' notes are as if absent
        self.touched = Touched(note.id, vault.name, note.path, note.title)
        return note, vault

    def vault(self, name: str | None) -> Vault:
        """The vault a new note goes to: the one named, else the session's, else the only one in scope."""
        if self.scope and name is not None and name not in self.scope:
            said = f"vault {self.scope[0]!r}" if len(self.scope) == 1 else f"vaults {', '.join(map(repr, self.scope))}"
            raise KmsError("invalid-input", f"this session writes only to {said}, not {name!r}", vault=name)
        name = name or (self.scope[0] if len(self.scope) == 1 else None)
        if name:
            vault = get_vault(self.conn, name)
        else:
            vaults = self.vaults_in_scope()
            if not vaults:
                raise KmsError("no-index", "no vault is registered; add one with `kms vault add`")
            if len(vaults) > 1:
                raise KmsError(
                    "invalid-input",
                    f"several vaults are registered; say which: {', '.join(v.name for v in vaults)}",
                    vaults=[v.name for v in vaults],
                )
            vault = vaults[0]
        self.touched.vault = vault.name
        return vault

    def vaults_in_scope(self) -> list[Vault]:
        """The registered vaults this session may write to, in the registry's order."""
        return [v for v in list_vaults(self.conn) if not self.scope or v.name in self.scope]

    def home_vault(self) -> Vault:
        """Where a note of the session's own goes (memory, the session note): its vault, else the first added
        in its scope."""
        vaults = self.vaults_in_scope()
        if not vaults:
            raise KmsError("no-index", "no vault is registered; add one with `kms vault add`")
        return min(vaults, key=lambda v: (v.added_at, v.id))


@contextlib.contextmanager
def undone_unless_recorded(ctx: WriteContext) -> Iterator[None]:
    """A write that cannot be recorded changes no note: if the database fails inside this block (a
    full disk for it, damage), every file the call changed in it is put back as kms read it,
    unless a save replaced kms's version meanwhile (that newer save is the person's and stays)."""
    outer = ctx.put_back
    ctx.put_back = []
    try:
        yield
    except apsw.Error:
        ctx.take_back()
        raise
    finally:
        ctx.put_back = outer
