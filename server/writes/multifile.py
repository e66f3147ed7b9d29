"""Change several files as one unit: every file is rewritten (and moved) or none is.

The organise tools (a rename rewriting the links of many notes, a move, a trash) and the
revert of any ``FilesChanged`` share this path. Under kms's lock for every file (taken in
path order, so two calls never deadlock) each file is read and its new text computed; the
new bytes are written to temp files and flushed; right before the renames every file is
checked again. A person's editor does not take kms's lock, so a file that changed
meanwhile is recomputed once on its fresh text; a second change is a ``conflict`` and
nothing is committed. Should a rename itself fail half way, the files already replaced get
their old bytes back. A file that moves is created at its new path (never over an existing
file: ``already-exists``) before the old one is removed. Should the database then fail to record
the unit (its disk full), every file is put back the same way (``cas.undone_unless_recorded``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

if TYPE_CHECKING:
    from server.index.records import FileRecord

from server.activity.changes import FileChange, file_change
from server.errors import KmsError
from server.store.health import UNUSABLE
from server.store.locks import file_lock, own_writes
from server.vault.files import PendingWrite, atomic_write, decode, encode, fsync_dir, sha256_hex
from server.vault.paths import is_within, locate_note, locate_notes
from server.vault.registry import Vault
from server.writes import staging
from server.writes.cas import lock_dir_for, on_unrecorded, put_back

log = logging.getLogger("kms.writes")


@dataclass
class FilePlan:
    """One file of a unit: where it is, how its new text follows from its current one, where it goes."""

    path: str
    compute: Callable[[str], str]
    new_path: str | None = None
    hidden: bool = False  # agents never see its name
    expect_hash: str | None = None  # it must be exactly these bytes (a revert): else ``conflict``
    delete: bool = False  # the file goes (the revert of a note kms created)


@dataclass
class _Prepared:
    plan: FilePlan
    real: Path
    raw: bytes
    text: str
    new_text: str
    new_raw: bytes
    pending: PendingWrite | None = None
    record: FileRecord | None = None  # the index record of ``new_raw``, parsed while the fsyncs run


def _name(plan: FilePlan) -> str:
    return "a note you cannot see" if plan.hidden else repr(plan.path)


def _read(real: Path, plan: FilePlan) -> bytes:
    try:
        return real.read_bytes()
    except FileNotFoundError:
        raise KmsError("conflict", f"{_name(plan)} is gone; nothing was changed", path=None if plan.hidden
                       else plan.path) from None


def _prepare(vault: Vault, plan: FilePlan, real: Path) -> _Prepared:
    raw = _read(real, plan)
    if plan.expect_hash is not None and sha256_hex(raw) != plan.expect_hash:
        raise KmsError("conflict", f"{_name(plan)} changed since; nothing was changed",
                       path=None if plan.hidden else plan.path)
    text, fmt = decode(raw)
    new_text = "" if plan.delete else plan.compute(text)
    new_raw = b"" if plan.delete else raw if new_text == text else encode(new_text, fmt)
    staging.check(vault.name, plan.path, raw, None if plan.delete else new_raw, hidden=plan.hidden)
    return _Prepared(plan, real, raw, text, new_text, new_raw)


def _in_place(prep: _Prepared) -> bool:
    """Is this file rewritten where it is (through a temp file), not moved, deleted or left alone?"""
    return prep.new_raw != prep.raw and prep.plan.new_path is None and not prep.plan.delete


def _stage(prep: _Prepared) -> None:
    """The temp file beside a file rewritten in place, holding its new bytes (flushed later, together)."""
    if _in_place(prep):
        prep.pending = PendingWrite(prep.real, prep.new_raw, sync_now=False)


def _stage_all(prepared: list[_Prepared]) -> None:
    """Every temp file written first, then their fsyncs all in flight at once (creating files while fsyncs
    commit the journal makes each create wait)."""
    for prep in prepared:
        _stage(prep)
    for prep in prepared:
        if prep.pending:
            prep.pending.start_sync()


def _case_only(real: Path, dest: Path) -> bool:
    """A rename that changes only the case of the name (``dest`` may be the same file on a
    case-insensitive file system)."""
    return real != dest and str(real).casefold() == str(dest).casefold()


def _destination(vault: Vault, new_path: str, real: Path) -> Path:
    """Where a moving file goes: its folder made (inside the vault only), the name still free (or the
    file itself under another case, on a case-insensitive file system). ``new_path`` was built by kms
    (a checked folder and name, ``.trash/...``, or a recorded path)."""
    folder, _, name = new_path.rpartition("/")
    parent = vault.root.joinpath(*folder.split("/")) if folder else vault.root
    if not is_within(parent, vault.root):
        raise KmsError("invalid-input", f"{folder!r} leads outside the vault")
    parent.mkdir(parents=True, exist_ok=True)
    if not is_within(parent, vault.root) or not parent.is_dir():
        raise KmsError("invalid-input", f"{folder!r} leads outside the vault or is not a folder")
    dest = parent / name
    if (dest.exists() or dest.is_symlink()) and not (_case_only(real, dest) and _same_file(real, dest)):
        raise KmsError("already-exists", f"{new_path!r} already exists", path=new_path)
    return dest


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _move(real: Path, dest: Path, new_raw: bytes) -> None:
    """Put ``new_raw`` at ``dest`` (never over another file) and remove ``real``. A case-only rename
    goes through a temp name first: on a case-insensitive file system ``dest`` *is* ``real``, and
    creating it then removing ``real`` would remove the note."""
    if _case_only(real, dest):
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


def reindex_moves(conn: apsw.Connection, vault: Vault, files: list[tuple[str, str | None]],
                  keep_ids: dict[str, str] | None = None, written: dict[str, FileRecord] | None = None,
                  ready: Callable[[], object] = lambda: None) -> str | None:
    """Bring the index in step with files just changed: ``files`` are (path before, path after or None).

    A file that moved keeps its notes row, so its id; one moved into a hidden folder (``.trash/``) leaves
    the index; one that comes back into it (from the trash) gets back the id in ``keep_ids`` (path ->
    id) when no other note took it. ``written``: the records of the bytes kms writes in place (path ->
    ``record_of_bytes``): those rows are written first, from the records, while ``ready`` (the renames,
    on another thread) is still under way; every file the index reads comes after ``ready`` returned.
    An error of ``ready`` is raised as it is. Returns a warning when the index could not be updated
    (the files are written; the watcher heals it)."""
    from server.index.indexer import LinkWork, reindex_file  # not at import: the dashboard imports this
    from server.store.db import shared_commit, write_tx

    batch = LinkWork()  # links resolved once for every file, not once per file (500 linking notes)
    files = [(old, None if new and any(s.startswith(".") for s in new.split("/")) else new) for old, new in files]
    early = {old: (written or {})[old] for old, new in files if not new and old in (written or {})}
    try:
        with shared_commit(conn), write_tx(conn):  # one transaction: the moved rows and their re-parse
            for old, new in files:
                if new:  # re-parsed at its new path (content_hash '' forces the parse)
                    conn.execute("UPDATE notes SET path = ?, content_hash = '' WHERE vault_id = ? AND path = ?",
                                 (new, vault.id, old))
            def keep_id(path: str, note_id: str | None) -> None:
                want = (keep_ids or {}).get(path)
                if note_id and want and note_id != want and not conn.execute(
                        "SELECT 1 FROM notes WHERE id = ?", (want,)).fetchall():
                    conn.execute("UPDATE notes SET id = ? WHERE vault_id = ? AND path = ?", (want, vault.id, path))

            for path, rec in early.items():  # no file is read for these: they go while the renames run
                keep_id(path, reindex_file(conn, vault, path, rec, batch=batch))
            try:
                ready()
            except BaseException as e:
                raise _NotReady from e
            for old, new in files:
                path = new or old
                if path in early:
                    continue
                keep_id(path, reindex_file(conn, vault, path, batch=batch))
                if new and new.casefold() != old.casefold():  # (a case-only rename: the old name may be the file)
                    reindex_file(conn, vault, old, batch=batch)  # a row left at the old path (none, normally) goes
            batch.finish(conn, vault.id)
    except _NotReady as e:
        raise e.__cause__ from None  # type: ignore[misc]
    except UNUSABLE:  # the database itself failed (its disk full): the unit is put back, not half recorded
        raise
    except Exception as e:  # noqa: BLE001 - see the docstring
        ready()  # (the files are written all the same)
        return f"written, but the index update failed: {e}"
    return None


class _NotReady(Exception):
    """``reindex_moves``: what ``ready`` raised, carried past the index's own error handling."""


_committer = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kms-commit")  # (one unit uses one)


def apply_plans(conn: apsw.Connection, vault: Vault, plans: list[FilePlan], *, lock_dir: Path | None = None,
                keep_ids: dict[str, str] | None = None) -> tuple[list[FileChange], str | None]:
    """Apply every plan or none, and update the index; return what changed in each file that changed (in
    ``plans`` order) and an index warning, if any. The database's write lock is taken (after the file
    locks, as every writer does) before the first rename and held until the index is updated, so the
    watcher never sees a moved file whose row has not moved with it (it would give the note a new id)."""
    from server.index.records import record_of_bytes  # not at import: the dashboard imports this
    from server.store.db import shared_commit, write_tx

    lock_dir = lock_dir or lock_dir_for(conn)
    reals = [real for real, _rel in locate_notes(vault.root, [p.path for p in plans])]
    if (cap := staging.capturing()) is not None:
        return _preview(cap, vault, plans, reals), None
    dests = {i: vault.root / p.new_path for i, p in enumerate(plans) if p.new_path}
    with contextlib.ExitStack() as stack:
        stack.enter_context(own_writes())  # this process's watcher waits (see ``own_writes``)
        for target in sorted({*map(str, reals), *map(str, dests.values())}):
            stack.enter_context(file_lock(target, lock_dir))
        for i, p in enumerate(plans):
            if p.new_path and p.new_path != p.path:
                dests[i] = _destination(vault, p.new_path, reals[i])
        prepared: list[_Prepared] = []
        try:
            for plan, real in zip(plans, reals, strict=True):
                prepared.append(_prepare(vault, plan, real))
            staged = _committer.submit(_stage_all, prepared)  # the temp files made on a kms thread (system
            try:  # calls, the GIL free) while this one parses the new texts for the index
                for prep in prepared:
                    if _in_place(prep):
                        prep.record = record_of_bytes(prep.plan.path, 0, prep.new_raw)  # (its mtime: below)
            finally:
                wait([staged])
            staged.result()
            for k, prep in enumerate(prepared):  # the re-check, right before the renames
                if _read(prep.real, prep.plan) != prep.raw:
                    if prep.pending:
                        prep.pending.discard()
                    prepared[k] = prep = _prepare(vault, prep.plan, prep.real)  # a person saved it: once more
                    _stage(prep)
                    if prep.pending:
                        prep.pending.start_sync()
                        prep.record = record_of_bytes(prep.plan.path, 0, prep.new_raw)
                    if _read(prep.real, prep.plan) != prep.raw:
                        raise KmsError("conflict", f"{_name(prep.plan)} kept changing while kms was rewriting it; "
                                       "nothing was changed: try again", path=None if prep.plan.hidden
                                       else prep.plan.path)
            for prep in prepared:
                if prep.pending is not None and prep.record is not None:
                    prep.record.set_mtime(prep.pending.mtime_ns)  # the rename keeps the temp file's mtime
            out = _changes(prepared, dests)
            written = {p.plan.path: p.record for p in prepared if p.record is not None}
            with shared_commit(conn), write_tx(conn):  # the write lock first, then the renames
                # the renames run on a thread (system calls, the GIL free) while this one writes the rows
                renamed = _committer.submit(_commit, vault, prepared, dests)
                try:
                    warning = reindex_moves(conn, vault, [(f.path, f.new_path) for f in out], keep_ids, written,
                                            ready=renamed.result)
                finally:
                    with contextlib.suppress(BaseException):  # (its own error, if any, is raised above)
                        done = renamed.result()
                        on_unrecorded(lambda: _take_back(vault, done, lock_dir))  # if the database cannot record it
        finally:
            for prep in prepared:
                if prep.pending:
                    prep.pending.discard()
    return out, warning


def _preview(cap: staging.Capture, vault: Vault, plans: list[FilePlan], reals: list[Path]) -> list[FileChange]:
    """What the unit would change, for a call staged for approval: computed, captured, nothing written."""
    out: list[FileChange] = []
    for plan, real in zip(plans, reals, strict=True):
        raw = _read(real, plan)
        text, fmt = decode(raw)
        new_text = "" if plan.delete else plan.compute(text)
        new_raw = b"" if plan.delete else raw if new_text == text else encode(new_text, fmt)
        moved = plan.new_path if plan.new_path and plan.new_path != plan.path else None
        if new_raw != raw or moved or plan.delete:
            cap.add(vault.name, plan.path, raw, None if plan.delete else new_raw, new_path=moved, hidden=plan.hidden)
            out.append(file_change(plan.path, text, new_text, sha256_hex(raw),
                                   "" if plan.delete else sha256_hex(new_raw), new_path=moved, hidden=plan.hidden))
    return out


def _changes(prepared: list[_Prepared], dests: dict[int, Path]) -> list[FileChange]:
    out: list[FileChange] = []
    for i, prep in enumerate(prepared):
        moved = prep.plan.new_path if i in dests else None
        if prep.new_raw != prep.raw or moved or prep.plan.delete:
            out.append(file_change(prep.plan.path, prep.text, prep.new_text, sha256_hex(prep.raw),
                                   "" if prep.plan.delete else sha256_hex(prep.new_raw), new_path=moved,
                                   hidden=prep.plan.hidden))
    return out


def _commit(vault: Vault, prepared: list[_Prepared], dests: dict[int, Path]) -> list[tuple[_Prepared, Path | None]]:
    """Replace every file, each only if it is still what was read (checked right before its rename);
    on a failure put back the ones already replaced (those nobody touched since) and raise. Returns
    what was done (each file and where it went), for ``_take_back``."""
    done: list[tuple[_Prepared, Path | None]] = []
    for prep in prepared:  # every new file on disk first: the renames then share journal commits
        if prep.pending is not None:
            prep.pending.wait_synced()
    try:
        for i, prep in enumerate(prepared):
            if _read(prep.real, prep.plan) != prep.raw:
                raise KmsError("conflict", f"{_name(prep.plan)} was saved by someone else just now; nothing was "
                               "changed: try again", path=None if prep.plan.hidden else prep.plan.path)
            dest = dests.get(i)
            if prep.plan.delete:
                os.unlink(prep.real)
                with contextlib.suppress(OSError):
                    fsync_dir(prep.real.parent)
                done.append((prep, None))
            elif dest is not None:
                _move(prep.real, dest, prep.new_raw)
                with contextlib.suppress(OSError):
                    fsync_dir(prep.real.parent)
                done.append((prep, dest))
            elif prep.pending is not None:
                prep.pending.commit(sync_dir=False)
                done.append((prep, None))
        for folder in {prep.real.parent for prep, dest in done if dest is None and not prep.plan.delete}:
            fsync_dir(folder)  # once per folder, after all the renames into it
    except BaseException:
        _roll_back(vault, done)
        raise
    return done


def _take_back(vault: Vault, done: list[tuple[_Prepared, Path | None]], lock_dir: Path) -> None:
    """The database could not record the unit: every file goes back to what kms read, under the locks
    again (in path order), each only while it still holds what kms wrote."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(own_writes())
        for target in sorted({str(p) for prep, dest in done for p in (prep.real, dest) if p is not None}):
            stack.enter_context(file_lock(target, lock_dir))
        _roll_back(vault, done)


def _roll_back(vault: Vault, done: list[tuple[_Prepared, Path | None]]) -> None:
    """Put back the old bytes of files already replaced, unless someone changed them since: a rewritten
    file by compare-and-swap (``cas.put_back``), a moved one only while it holds kms's bytes, a deleted
    one never over a file that took its name meanwhile. Goes on past a file it cannot put back."""
    for prep, dest in reversed(done):
        try:
            if prep.plan.delete:
                atomic_write(prep.real, prep.raw, create_only=True)
            elif dest is not None:
                if dest.read_bytes() == prep.new_raw:  # else a person's save after kms's rename: theirs stays
                    _move(dest, prep.real, prep.raw)
            else:
                real_rel = locate_note(vault.root, prep.plan.path)[1]  # (a symlinked note: its target's)
                put_back(vault, prep.real, real_rel, prep.raw, sha256_hex(prep.new_raw), None)
        except (OSError, KmsError):  # the vault's disk may be failing too: the others still go back
            log.exception("could not put %s back", "a hidden note" if prep.plan.hidden else prep.plan.path)
