"""The one recorder of the person's own writes: a revert, a restore, a trash restore, a session undo's trash.

An agent's write goes through the guard (``server.writes.guard``); the person's writes have no gate, no
limit and no approval, but they keep the same three promises, kept here once for all of them:

- exactly one provenance row (actor ``person``), whatever happened, with the change it made
  (``record.record_call``), so the person's write is itself revertible;
- what it wrote is indexed once, when it is done, in the same commit as that row (``reindex.flush``);
- a write the database cannot record (its disk full) changes no file: they are put back
  (``context.undone_unless_recorded``), the commit included;
- in a vault in git mode, it is one commit of its own, authored by the person (``git_units.PERSON``), as an
  agent's unit is (``git_step``): not left in the work tree for the next agent unit's checkpoint.

Use::

    with person_write(conn, tool="revert", summary="revert #12") as call:
        call.touched = Touched(...)        # what it is about, as soon as known
        call.outcome = do_it(call.ctx)     # the write, through the call's context
        call.message = "removed 12 characters"
    return {**call.outcome.result, "invocationId": call.invocation_id}
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import apsw

from server.store.db import shared_commit
from server.store.health import UNUSABLE
from server.vault import git_units
from server.writes import git_step, reindex
from server.writes.context import Touched, WriteContext, undone_unless_recorded
from server.writes.outcome import WriteOutcome
from server.writes.record import record_call


@dataclass
class PersonCall:
    """One write of the person's, as it goes: the body fills in what the provenance row says."""

    ctx: WriteContext
    summary: str
    touched: Touched = field(default_factory=Touched)
    outcome: WriteOutcome | None = None
    message: str | None = None
    invocation_id: int = 0  # its provenance row, once recorded

    @property
    def result(self) -> WriteOutcome:
        """The outcome of a body that finished (it set ``outcome``)."""
        assert self.outcome is not None
        return self.outcome


@contextlib.contextmanager
def person_write(
    conn: apsw.Connection,
    *,
    tool: str,
    summary: str,
    touched: Touched | None = None,
    session_id: str = "person",
    reverts_id: int | None = None,
) -> Iterator[PersonCall]:
    """Run the body as one of the person's writes (see the module docstring); its row is recorded in a
    ``finally``, a failure included, then the failure is raised as it is."""
    ctx = WriteContext.for_person(conn, session_id=session_id, index_after=[])
    call = PersonCall(ctx, summary, touched or Touched())
    with undone_unless_recorded(ctx), shared_commit(conn):
        failure: BaseException | None = None
        try:
            yield call
            reindex.flush(ctx)
        except BaseException as e:
            failure, call.outcome = e, None  # (a write whose index or durability failed did not succeed)
            if not isinstance(e, UNUSABLE):  # (a database failure: the files are put back)
                reindex.flush(ctx)
            raise
        finally:
            call.invocation_id = record_call(
                conn,
                tool=tool,
                session_id=session_id,
                actor="person",
                input_summary=call.summary,
                touched=call.touched,
                outcome=call.outcome,
                failure=failure,
                message=call.message,
                reverts_id=reverts_id,
            )
    if call.outcome is not None and ctx.landed:  # a vault in git mode: the person's write is a unit of theirs
        unit = git_units.Unit(call.invocation_id, session_id, tool, git_units.PERSON_APPROVER, git_units.PERSON)
        git_step.keep_unit(conn, ctx.landed, unit)
