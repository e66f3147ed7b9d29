"""At most once, whatever instant the process dies: the journal of a write call with an ``idempotencyKey``.

A keyed call's retry is answered from the first call's provenance row (``server.activity.idempotency``).
That row is committed after the note file changed, so a process killed between the two (``kill -9``, a
crash, a power cut) used to leave the note changed and no row: the retry found no answer and wrote the
text a second time. Measured before this module: 3 of 40 kills right after an append, 5 of 6 load runs.

So a keyed call's file changes go through the unit journal (``server.writes.unit_journal``), as a unit of
several notes always did:

1. before the first byte of a note changes, the journal (every file's old and new bytes) is written,
   flushed, name included (``begin``), and its writer holds its ``flock`` while it lives;
2. the files change (``write.landed``);
3. the index rows, the provenance row with the key and the answer, and the journal's token
   (``applied_units``) are committed together, in the call's one commit (``recorded``); the journal
   goes right after that commit. The note's lock is held until then, so no other writer builds on
   bytes that may yet be taken back.

Whatever instant the process dies, the next write call (or the next server's start) finds either
the token committed (the call landed and is recorded: the journal goes, and the retry is answered
from the row, the first call's result) or not (the journal's token is absent: every note of it that
holds the new bytes, or a torn mix, gets its old bytes back, a created note goes; then the retry
finds no row and applies the call once). Which of the two it was is told by the database, never guessed
from the file: the token and the row are one commit. Decision: a change that landed but was never
recorded is undone rather than completed. kms's rule is already that a write the database did not
record changes no note (``context.undone_unless_recorded``: a full disk for the database); a crash is
the same case, and the call never answered, so its agent retries it (then it lands once) or learns
nothing was written. Completing it instead would need the index, the change record for revert and the
answer rebuilt outside the call that computed them.

A note a person saved between the crash and the recovery is never written over: its journal is kept
(``*.kept``, named by ``kms doctor``). The journal names its call (``idempotency.call_id``: session and
key, hashed), so a retry of a call whose journal was kept is refused (``conflict``, ``call_of``): whether
it landed is unknown, and applying it again could write it twice.

What it costs: a keyed call writes its journal (a new file: its flush and its folder's) on an I/O thread
while the note's own new file is flushed, and the journal is removed off the answer's path; on the test
machine's ext4 that added about 1 ms to a keyed append through the guard, 3-5 ms over stdio on a busy machine
(a new file's fsync there is ~3 ms, its folder's ~2.5 ms). Calls without a
key keep the cheaper path (no journal, no extra flush): their agent cannot retry safely anyway, so a
crash's window costs them at most an unrecorded change, as before.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import apsw

from server.errors import KmsError
from server.store.db import after_commit, at_group_end, write_tx
from server.writes.context import WriteContext
from server.writes.crash_points import crash_point
from server.writes.staging import Capture
from server.writes.unit_journal import Entry, UnitJournal, journal_dir, kept_calls

_io = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kms-once")  # journals written and removed


def call_of(ctx: WriteContext) -> str | None:
    """The keyed call a journal is for (None: not a keyed call); ``conflict`` when an earlier try of the same
    call was cut short by a crash and its journal had to be kept (a person saved one of its notes before
    kms could take it back): whether it landed is unknown, so it is not applied again."""
    if ctx.once_call is not None and ctx.once_call in kept_calls(ctx.lock_dir):
        raise KmsError(
            "conflict",
            "an earlier try of this call (same idempotencyKey) was cut short by a crash, and its note was "
            "saved by someone else since: kms cannot tell whether it landed, so it is not applied again. "
            "Read the note; if your change is not there, call again with a new idempotencyKey",
        )
    return ctx.once_call


class Intent:
    """A keyed call's journal being written and flushed on an I/O thread (``start``) while the note's own new
    file is flushed on another: the two flushes overlap. ``wait`` before the note changes."""

    def __init__(self, ctx: WriteContext, future: Future[UnitJournal] | None) -> None:
        self.ctx, self.future = ctx, future
        self.journal: UnitJournal | None = None
        self.waited = future is None

    def wait(self) -> UnitJournal | None:
        """The journal, durable (None for a call with no key): from here the note may change."""
        if not self.waited:
            self.waited = True
            assert self.future is not None
            self.journal = journal = self.future.result()
            at_group_end(self.ctx.conn, journal.release)  # (ended at the commit, else ``recover``'s)
            crash_point("write.journaled")
        return self.journal

    def hold_until_recorded(self, locks: contextlib.ExitStack) -> None:
        """``hold_until_recorded`` for this intent's call."""
        _hold(self.ctx.conn, self.ctx.once_call, locks)

    def recorded(self) -> None:
        """``recorded`` for this intent's journal (once the note changed: a ``reindex.Wrote`` step)."""
        _recorded(self.ctx.conn, self.journal)

    def drop_unless_waited(self) -> None:
        """The call failed before ``wait``, so before the note changed: its journal goes (if it was made)."""
        if not self.waited:
            self.waited = True
            assert self.future is not None
            with contextlib.suppress(Exception):  # (failed to make it: nothing to drop)
                self.future.result().end()


def start(ctx: WriteContext, entries: list[Entry]) -> Intent:
    """For a keyed call (``ctx.once_call``), start the journal of the files it is about to change (``Intent``);
    for any other call an intent with nothing to do."""
    if ctx.once_call is None or isinstance(ctx.staging, Capture):  # (a preview writes nothing)
        return Intent(ctx, None)
    return Intent(ctx, _io.submit(UnitJournal.begin, journal_dir(ctx.lock_dir), entries, call_of(ctx)))


def begin(ctx: WriteContext, entries: list[Entry]) -> UnitJournal | None:
    """``start`` and ``wait`` at once: the journal durable before the first file changes (None: no key)."""
    return start(ctx, entries).wait()


def forget(journal: UnitJournal | None) -> None:
    """Nothing was written after all (the file changed under kms: computed again, with a new journal)."""
    if journal is not None:
        journal.end()


def hold_until_recorded(ctx: WriteContext, locks: contextlib.ExitStack) -> None:
    """A keyed call keeps its notes' locks until its commit: a writer that took one sooner could build on
    bytes a crash then takes back. Any other call lets them go now, as before."""
    _hold(ctx.conn, ctx.once_call, locks)


def _hold(conn: apsw.Connection, once_call: str | None, locks: contextlib.ExitStack) -> None:
    if once_call is not None:
        at_group_end(conn, locks.pop_all().close)


def recorded(ctx: WriteContext, journal: UnitJournal | None) -> None:
    """The journal's token goes into the call's commit (with its index rows and provenance row); the journal
    itself goes once that commit is done."""
    _recorded(ctx.conn, journal)


def _recorded(conn: apsw.Connection, journal: UnitJournal | None) -> None:
    if journal is None:
        return
    with write_tx(conn):
        journal.mark_applied(conn)

    def done() -> None:
        crash_point("write.recorded")
        _io.submit(_remove, journal.path)  # off the answer's path (its descriptor is closed at the group's end)

    after_commit(conn, done)


def _remove(path: Path) -> None:
    """A recorded call's journal goes (a journal left by a death before this is ``recover``'s: its token is
    committed, so it only deletes it)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
