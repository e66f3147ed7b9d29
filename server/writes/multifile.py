"""Change several files as one unit: every file is rewritten (and moved) or none is.

The organise tools (a rename rewriting the links of many notes, a move, a trash) and the
revert of any ``FilesChanged`` share this path. Under kms's lock for every file (taken in
path order, so two calls never deadlock) each file is read and its new text computed; right
before the writes every file is checked again (its inode, mtime and size). A person's editor
does not take kms's lock, so a file that changed meanwhile is recomputed once on its fresh
text; a second change is a ``conflict`` and nothing is committed.

A file rewritten where it is (a linking note) is written in place, as an editor saves it,
under the unit's write-ahead journal (``server.writes.unit_journal``: old and new bytes of
every such file flushed beside the database first, so a crash in mid-unit is undone as a
whole). Each one is compared with what was read through the very descriptor that writes it,
and the fsyncs then run all at once. A file that moves is created at its new path (never over
an existing file: ``already-exists``) before the old one is removed. Should a write fail half
way, the files already written get their old bytes back; should the database then fail to
record the unit (its disk full), every file is put back the same way
(``context.undone_unless_recorded``). A file is put back only while it holds kms's bytes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NoReturn

import apsw

from server.activity.changes import FileChange
from server.errors import KmsError
from server.index.records import record_of_bytes
from server.store.db import after_commit, at_group_end, shared_commit, write_tx
from server.store.health import UNUSABLE
from server.store.locks import file_lock, own_writes
from server.vault.files import (
    atomic_write,
    decode,
    encode,
    fsync_dir,
    sha256_hex,
    sync_and_close_all,
    write_failure,
)
from server.vault.paths import locate_notes, relpath_in_vault
from server.vault.registry import Vault
from server.writes import once, reindex
from server.writes.context import Landed, WriteContext
from server.writes.crash_points import crash_point
from server.writes.destination import case_only, destination, same_file
from server.writes.staging import Capture
from server.writes.unit_files import (
    FilePlan,
    Prepared,
    change_of,
    entry,
    in_place,
    name_of,
    read_file,
    saved_meanwhile,
    seen_now,
    signature,
)
from server.writes.unit_journal import UnitJournal, journal_dir, read_all, recover, undo, write_all
from server.writes.unit_scope import check_moves, refuse_rewrites_outside

log = logging.getLogger("kms.writes")


def _prepare(ctx: WriteContext, vault: Vault, plan: FilePlan, real: Path) -> Prepared:
    raw, st = read_file(real, plan)
    if plan.expect_hash is not None and sha256_hex(raw) != plan.expect_hash:
        raise KmsError(
            "conflict", f"{name_of(plan)} changed since; nothing was changed", path=None if plan.hidden else plan.path
        )
    text, fmt = decode(raw)
    new_text = "" if plan.delete else plan.compute(text)
    new_raw = b"" if plan.delete else raw if new_text == text else encode(new_text, fmt)
    ctx.check_approved(vault.name, plan.path, raw, None if plan.delete else new_raw, hidden=plan.hidden)
    prep = Prepared(plan, real, raw, text, new_text, new_raw, signature(st), st.st_nlink > 1)
    if in_place(prep) and not os.access(real, os.W_OK):
        raise KmsError(
            "conflict",
            f"{name_of(plan)} is read-only (its file permissions); nothing was changed",
            path=None if plan.hidden else plan.path,
        )
    return prep


def _with_record(vault: Vault, prep: Prepared) -> Prepared:
    """The index record of the new bytes, parsed as the vault's dialect reads them."""
    if in_place(prep):
        prep.record = record_of_bytes(prep.plan.path, 0, prep.new_raw, dialect=vault.rules)  # (mtime: once written)
    return prep


def _recheck(ctx: WriteContext, vault: Vault, prepared: list[Prepared]) -> None:
    """Right before the writes: a file a person saved since it was read is read and computed once more;
    one saved again meanwhile is a ``conflict``."""
    for k, prep in enumerate(prepared):
        if seen_now(prep.real) != prep.seen:
            prepared[k] = prep = _with_record(vault, _prepare(ctx, vault, prep.plan, prep.real))
            if seen_now(prep.real) != prep.seen:
                raise KmsError(
                    "conflict",
                    f"{name_of(prep.plan)} kept changing while kms was rewriting it; nothing was changed: try again",
                    path=None if prep.plan.hidden else prep.plan.path,
                )


def _move(real: Path, dest: Path, new_raw: bytes) -> None:
    """Put ``new_raw`` at ``dest`` (never over another file) and remove ``real``. A case-only rename
    goes through a temp name first: on a case-insensitive file system ``dest`` *is* ``real``, and
    creating it then removing ``real`` would remove the note."""
    if case_only(real, dest):
        aside = real.with_name(f".kms-{secrets.token_hex(6)}.tmp")
        os.rename(real, aside)
        try:
            atomic_write(dest, new_raw, create_only=True)
        except BaseException:
            os.rename(aside, real)
            raise
        os.unlink(aside)
    else:
        atomic_write(dest, new_raw, create_only=True)
        os.unlink(real)


_committer = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kms-commit")  # (one unit uses one)


def apply_plans(
    ctx: WriteContext, vault: Vault, plans: list[FilePlan], *, keep_ids: dict[str, str] | None = None
) -> tuple[list[FileChange], reindex.Unit | None]:
    """Apply every plan or none; return what changed in each file that changed (in ``plans`` order) and the
    unit as handed to the index (None: a preview), whose warning ``reindex.warn_into`` puts in an answer.

    The unit says what it wrote (``reindex.unit_landed``): in a call that indexes after its operation (the
    guard's, a person's write) its rows are written by ``reindex.flush``, in the call's one commit. The
    database's write lock is taken (after the file locks, as every writer does) before the first write and
    held by the call's commit group until that commit, so the watcher never sees a moved file whose row has
    not moved with it (it would give the note a new id); the file locks and the journal are let go when the
    group ends. The fsyncs start here and run while the rows are written; the index waits for them."""
    conn, lock_dir = ctx.conn, ctx.lock_dir
    located = locate_notes(vault.root, [p.path for p in plans])
    reals, places = [real for real, _rel in located], [rel for _real, rel in located]
    check_moves(ctx, vault, plans, places)
    if (cap := ctx.capture) is not None:
        return _preview(ctx, cap, vault, plans, reals, places), None
    dests = {i: vault.root / p.new_path for i, p in enumerate(plans) if p.new_path}
    with contextlib.ExitStack() as stack:
        stack.enter_context(own_writes())  # this process's watcher waits (see ``own_writes``)
        targets = sorted({*map(str, reals), *map(str, dests.values())})
        for target in targets:
            stack.enter_context(file_lock(target, lock_dir))
        recover(conn, lock_dir, held=targets)  # a dead writer's unit over these notes is undone first
        for i, p in enumerate(plans):  # every name still free, before anything is read or made
            if p.new_path and p.new_path != p.path:
                destination(vault, p.new_path, reals[i], make=False)
        prepared = [
            _with_record(vault, _prepare(ctx, vault, plan, real)) for plan, real in zip(plans, reals, strict=True)
        ]
        _recheck(ctx, vault, prepared)
        refuse_rewrites_outside(ctx, vault, [(p.plan, places[i]) for i, p in enumerate(prepared) if in_place(p)])
        for i, p in enumerate(plans):  # (a folder is made only once nothing refuses the unit before its writes)
            if p.new_path and p.new_path != p.path:
                dests[i] = destination(vault, p.new_path, reals[i])
        out = _changes(prepared, dests)
        entries = [
            entry(prep, dests.get(i))
            for i, prep in enumerate(prepared)
            if in_place(prep) or prep.plan.delete or i in dests
        ]
        journal = UnitJournal.begin(journal_dir(lock_dir), entries, once.call_of(ctx)) if entries else None
        if journal is not None:
            stack.callback(journal.release)  # (a no-op once ended; else left on disk for ``unit_journal.recover``)
            crash_point("write.journaled")
        landing = _Landing(conn, [], journal)
        ctx.on_unrecorded(partial(_take_back, vault, landing, lock_dir))  # should the database fail
        try:
            with shared_commit(conn), write_tx(conn):  # the write lock first, then the files
                try:
                    _commit(prepared, dests, landing.done)
                    crash_point("write.landed")
                    ctx.landed.extend(_landed(vault, prepared, dests))
                except UNUSABLE:
                    raise  # the database failed: ``_take_back`` (or ``unit_journal.recover``) puts them back
                except BaseException as e:
                    landing.put_back()
                    if isinstance(e, OSError):
                        raise write_failure(e, "the notes of this change") from None
                    raise
                # the fsyncs run on kms's I/O threads (the GIL free) while the rows are written
                landing.durable = _committer.submit(_make_durable, landing.done)
                written = {p.plan.path: p.record for p in prepared if p.record is not None}
                unit = reindex.Unit(
                    vault,
                    [(f.path, f.new_path) for f in out],
                    keep_ids,
                    written,
                    ready=landing.ready,
                    recorded=landing.recorded,
                    failed=landing.failed,
                )
                reindex.unit_landed(ctx, unit)  # (indexed now outside a call that indexes after its operation)
        finally:
            if landing.durable is None:  # (else its descriptors are the fsyncs' to close)
                for prep in prepared:
                    if prep.fd is not None:
                        os.close(prep.fd)
        # the locks and the journal stay until the caller's group has committed the unit (or failed to): a
        # writer that took one sooner could write on a note of a unit whose writer then dies unrecorded, past
        # undoing
        at_group_end(conn, stack.pop_all().close)
    return out, unit


@dataclass
class _Landing:
    """A unit from its writes to its record: what it changed (``done``: each file and where it went), its
    fsyncs once started, its journal. The index ends it (``reindex.Unit``): ``recorded``, or ``failed``."""

    conn: apsw.Connection
    done: list[tuple[Prepared, Path | None]]
    journal: UnitJournal | None
    durable: Future[None] | None = None

    def ready(self) -> None:
        """Wait for the unit's fsyncs; raise what they raised."""
        if self.durable is not None:
            self.durable.result()

    def settle(self) -> None:
        """Wait for the fsyncs, whatever they did (before the files are touched again)."""
        with contextlib.suppress(BaseException):
            self.ready()

    def recorded(self) -> None:
        """The unit's rows are written: its journal's token goes in the same commit, the journal after it."""
        if self.journal is not None:
            self.journal.mark_applied(self.conn)
            after_commit(self.conn, partial(_recorded, self.journal))

    def put_back(self) -> None:
        """The unit failed before it was recorded: every file goes back (the journal too, if all did)."""
        self.settle()
        put_back = _roll_back(self.done)
        self.done.clear()
        if self.journal is not None and put_back:
            self.journal.end()

    def failed(self, error: BaseException) -> NoReturn:
        """The fsyncs (or the index) failed: the files go back; the error is raised, typed."""
        self.put_back()
        if isinstance(error, OSError):  # (an fsync the disk refused)
            raise write_failure(error, "the notes of this change") from None
        raise error


def _landed(vault: Vault, prepared: list[Prepared], dests: dict[int, Path]) -> list[Landed]:
    """What the unit changed on disk, file by file (a move: the old path gone, the new one made)."""
    out: list[Landed] = []
    for i, p in enumerate(prepared):
        old = relpath_in_vault(vault.root, p.real)
        new = relpath_in_vault(vault.root, dests[i]) if i in dests else old
        if new != old:
            out += [Landed(vault, old, p.raw, None), Landed(vault, new, None, p.new_raw)]
        elif p.plan.delete:
            out.append(Landed(vault, old, p.raw, None))
        elif p.new_raw != p.raw:
            out.append(Landed(vault, old, p.raw, p.new_raw))
    return out


def _recorded(journal: UnitJournal) -> None:
    """The unit is committed: its journal goes."""
    crash_point("write.recorded")
    journal.end()


def _preview(
    ctx: WriteContext, cap: Capture, vault: Vault, plans: list[FilePlan], reals: list[Path], places: list[str]
) -> list[FileChange]:
    """What the unit would change, for a call staged for approval: computed, captured, nothing written (and
    refused as the unit itself would be, ``unit_scope.refuse_rewrites_outside``)."""
    out: list[FileChange] = []
    seen: list[tuple[FilePlan, bytes, str, bytes, str, str | None]] = []
    for plan, real in zip(plans, reals, strict=True):
        raw, _st = read_file(real, plan)
        text, fmt = decode(raw)
        new_text = "" if plan.delete else plan.compute(text)
        new_raw = b"" if plan.delete else raw if new_text == text else encode(new_text, fmt)
        moved = plan.new_path if plan.new_path and plan.new_path != plan.path else None
        seen.append((plan, raw, text, new_raw, new_text, moved))
    refuse_rewrites_outside(
        ctx,
        vault,
        [
            (p, place)
            for (p, raw, _t, new_raw, _n, moved), place in zip(seen, places, strict=True)
            if new_raw != raw and not moved and not p.delete
        ],
    )
    for plan, raw, text, new_raw, new_text, moved in seen:
        if new_raw != raw or moved or plan.delete:
            cap.add(vault.name, plan.path, raw, None if plan.delete else new_raw, new_path=moved, hidden=plan.hidden)
            out.append(change_of(plan, raw, text, new_text, new_raw, moved))
    return out


def _changes(prepared: list[Prepared], dests: dict[int, Path]) -> list[FileChange]:
    out: list[FileChange] = []
    for i, prep in enumerate(prepared):
        moved = prep.plan.new_path if i in dests else None
        if prep.new_raw != prep.raw or moved or prep.plan.delete:
            out.append(change_of(prep.plan, prep.raw, prep.text, prep.new_text, prep.new_raw, moved))
    return out


def _commit(prepared: list[Prepared], dests: dict[int, Path], done: list[tuple[Prepared, Path | None]]) -> None:
    """Write, move or delete every file, each only if it is still what was read (checked right before),
    adding to ``done`` what was done (each file and where it went) as it goes. The writes in place are
    not flushed yet (``_make_durable``)."""
    for i, prep in enumerate(prepared):
        try:
            _commit_one(prep, dests.get(i), done)
        except OSError as e:  # a full vault disk, a folder swapped mid-write: typed (the caller puts back)
            raise write_failure(e, "a note you cannot see" if prep.plan.hidden else prep.plan.path) from None


def _commit_one(prep: Prepared, dest: Path | None, done: list[tuple[Prepared, Path | None]]) -> None:
    if in_place(prep):
        (_replace if prep.linked else _write_in_place)(prep, done)
        return
    if not (prep.plan.delete or dest is not None):
        return
    if read_file(prep.real, prep.plan)[0] != prep.raw:
        raise saved_meanwhile(prep.plan)
    done.append((prep, dest))  # (before the move: one that fails half way is taken back too)
    if prep.plan.delete:
        os.unlink(prep.real)
    else:
        assert dest is not None
        _move(prep.real, dest, prep.new_raw)
    with contextlib.suppress(OSError):
        fsync_dir(prep.real.parent)


def _write_in_place(prep: Prepared, done: list[tuple[Prepared, Path | None]]) -> None:
    """Rewrite the file where it is, through one descriptor: compared with what was read, written, and
    checked to be still the file at its name (a save by rename meanwhile took the name: conflict). It is
    in ``done`` from its first byte written, so a write that fails half way is put back with the rest."""
    fd = os.open(prep.real, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if read_all(fd) != prep.raw:
            raise saved_meanwhile(prep.plan)
        done.append((prep, None))
        write_all(fd, prep.new_raw)
        st = os.fstat(fd)
        if (seen_now(prep.real) or (-1,))[0] != st.st_ino:  # a save by rename took the name: kms wrote into
            write_all(fd, prep.raw)  # the file that was the note (gone once closed, or another hard link)
            done.pop()
            raise saved_meanwhile(prep.plan)
    except BaseException:
        os.close(fd)
        raise
    prep.fd = fd
    if prep.record is not None:
        prep.record.set_mtime(st.st_mtime_ns)


def _replace(prep: Prepared, done: list[tuple[Prepared, Path | None]]) -> None:
    """A note with other hard links is given a file of its own (a temp file renamed over it, flushed), so
    the other names keep their bytes: kms writes nothing that shows outside the vault."""
    if read_file(prep.real, prep.plan)[0] != prep.raw:
        raise saved_meanwhile(prep.plan)
    done.append((prep, None))
    atomic_write(prep.real, prep.new_raw)
    if prep.record is not None:
        prep.record.set_mtime(os.stat(prep.real).st_mtime_ns)


def _make_durable(done: list[tuple[Prepared, Path | None]]) -> None:
    """Flush every file written in place, all at once."""
    fds = []
    for prep, _dest in done:
        if prep.fd is not None:
            fds.append(prep.fd)
            prep.fd = None
    sync_and_close_all(fds)


def _take_back(vault: Vault, landing: _Landing, lock_dir: Path) -> None:
    """The database could not record the unit: every file goes back to what kms read, under the locks
    again (in path order), each only while it still holds what kms wrote."""
    landing.settle()  # (its fsyncs hold descriptors of the files)
    done = landing.done
    with contextlib.ExitStack() as stack:
        stack.enter_context(own_writes())
        for target in sorted({str(p) for prep, dest in done for p in (prep.real, dest) if p is not None}):
            stack.enter_context(file_lock(target, lock_dir))
        if done and _roll_back(done) and landing.journal is not None:
            landing.journal.end()


def _roll_back(done: list[tuple[Prepared, Path | None]]) -> bool:
    """Put back the old bytes of files already changed, unless someone changed them since: a file
    written in place only while it holds kms's bytes (or a part of them), a moved one likewise, a
    deleted one never over a file that took its name meanwhile. Goes on past a file it cannot put back;
    returns False if there was one (the unit's journal then stays, for ``unit_journal.recover``)."""
    ok = True
    for prep, dest in reversed(done):
        try:
            if prep.fd is not None:
                os.close(prep.fd)
                prep.fd = None
            if dest is not None:
                if not os.path.lexists(dest) or dest.read_bytes() != prep.new_raw:
                    continue  # never made, or a person's save after kms's move: theirs stays
                if os.path.lexists(prep.real) and not same_file(prep.real, dest):
                    os.unlink(dest)  # made, but the old one was never removed
                else:
                    _move(dest, prep.real, prep.raw)
            else:  # written in place, or deleted
                undo(entry(prep, None))
        except (OSError, KmsError):  # the vault's disk may be failing too: the others still go back
            ok = False
            log.exception("could not put %s back", "a hidden note" if prep.plan.hidden else prep.plan.path)
    return ok
