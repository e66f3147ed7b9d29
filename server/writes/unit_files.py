"""One file of a unit (``server.writes.multifile``): its plan, what kms read of it, how it is read, what it
changes (as the answer and the record say it) and its part of the unit's journal.

Kept apart from ``multifile``, which orders the unit (its locks, its journal, its commit, its index):
``unit_scope``, which ``multifile`` imports, names the plan from here without a cycle.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from server.activity.changes import FileChange, file_change
from server.errors import KmsError
from server.index.records import FileRecord
from server.vault.files import sha256_hex
from server.writes.unit_journal import Entry, read_all


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
class Prepared:
    plan: FilePlan
    real: Path
    raw: bytes
    text: str
    new_text: str
    new_raw: bytes
    seen: tuple[int, int, int] | None  # (inode, mtime, size) as read: the re-check compares it
    linked: bool  # other hard links lead to it (maybe from outside the vault): replaced, never written in place
    fd: int | None = None  # open from its write in place until its fsync
    record: FileRecord | None = None  # the index record of ``new_raw`` (its mtime set once written)


def name_of(plan: FilePlan) -> str:
    return "a note you cannot see" if plan.hidden else repr(plan.path)


def gone(plan: FilePlan) -> KmsError:
    return KmsError(
        "conflict", f"{name_of(plan)} is gone; nothing was changed", path=None if plan.hidden else plan.path
    )


def signature(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_mtime_ns, st.st_size


def seen_now(real: Path) -> tuple[int, int, int] | None:
    try:
        return signature(os.stat(real))
    except FileNotFoundError:
        return None


def read_file(real: Path, plan: FilePlan) -> tuple[bytes, os.stat_result]:
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise gone(plan) from None
    try:
        st = os.fstat(fd)
        return read_all(fd), st
    finally:
        os.close(fd)


def change_of(plan: FilePlan, raw: bytes, text: str, new_text: str, new_raw: bytes, moved: str | None) -> FileChange:
    """What the unit changes in this file, as its record and answer say it."""
    return file_change(
        plan.path,
        text,
        new_text,
        sha256_hex(raw),
        "" if plan.delete else sha256_hex(new_raw),
        new_path=moved,
        hidden=plan.hidden,
    )


def entry(prep: Prepared, dest: Path | None) -> Entry:
    """The file's part of the unit's journal."""
    return Entry(str(prep.real), prep.raw, prep.new_raw, None if dest is None else str(dest), prep.plan.delete)


def in_place(prep: Prepared) -> bool:
    """Is this file rewritten where it is, not moved, deleted or left alone?"""
    return prep.new_raw != prep.raw and prep.plan.new_path is None and not prep.plan.delete


def saved_meanwhile(plan: FilePlan) -> KmsError:
    return KmsError(
        "conflict",
        f"{name_of(plan)} was saved by someone else just now; nothing was changed: try again",
        path=None if plan.hidden else plan.path,
    )
