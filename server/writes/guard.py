"""The write guard: the one call every write-tier tool goes through.

``WriteService.call(tool, arguments)`` runs, in this order and nowhere else:

1. gate: the tool's tier (write, edit or organize) is on for this session (else ``feature-disabled``),
   and the person has not paused or revoked the session (``server.activity.control``: ``paused``,
   ``revoked``; read from the database on every call, so a running server obeys at once);
2. input validation: the tool's strict pydantic model (else ``invalid-input``);
3. a rate-limit slot, committed before any file is touched (else ``rate-limited``);
4. the operation, through the call's one ``WriteContext`` (``server.writes.context``: vault scope,
   allowlist, lock folder, the mode, put-back), built here from the session (``AgentSession``); every file
   the operation creates, changes, moves or removes passes ``WriteContext.check_write``, the one rule of
   where a write may land (the vault, the allowlist and the token's folders, judged where the file really
   is, symlinks followed), before anything is made; what it wrote is indexed once, when it returns, in the
   call's commit (``server.writes.reindex``);
5. exactly one provenance row, written in a ``finally`` whatever happened above, with
   the operation's typed change record (``server.activity.changes``).

A slot is given back when the call did not change a file, so the limits count writes. A call carrying an
``idempotencyKey`` its session already used for a successful call is answered from that call's row after
steps 1-2, and writes nothing (``server.activity.idempotency``); a keyed call's file changes are journaled so
that no crash leaves one landed but unrecorded, to be written again by the retry (``server.writes.once``).

Approval (``review.mode = before``, or a call above ``review.max_lines`` / ``review.max_files``; the older
``write.approval`` is read into the same policy: ``server.config.review``): after validation, ``stage`` runs
the operation once with a ``Capture`` as its context's mode (everything computed, nothing written) and, when
the call needs the person, records it in ``pending_writes`` with the exact per-file diff; the caller waits for
the decision (``wait``, or the MCP adapter's asynchronous loop) and ``settle`` then applies it through steps
3-5 with an ``Expected`` (the usual compare-and-swap, and every file exactly as shown: else ``conflict``), or
refuses it (``rejected``, ``approval-timeout``). Still one provenance row per call. Whatever the mode, a call
whose text looks like instructions planted for an agent (``server.vault.planted``, ``planted_reasons``) is
staged the same way, its reasons kept with it.

Under ``review.mode = after`` an agent's call that changed a note is listed once it lands, in its own commit
(``server.activity.landed``), for the person to keep or undo.

A detached session (``SessionConfig.review_detached``: a remote grant's) never waits: its staged call keeps
its session with it (``SessionConfig.snapshot``), takes the agent's write slot at staging, and is answered at
once (``staged_answer``); the person's decision applies it later from whatever process decides
(``server.writes.review.decide_pending``, through ``settle`` of a service rebuilt by ``for_detached``).

Adding a write tool is its operation (in ``server.writes``, returning a ``WriteOutcome``), its spec beside
its handler in its tier's registry module (``server.mcp.tools``), and its test; nothing here names a tool.

A ``WriteService`` belongs to one session and may be shared by threads (a connection per thread).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import apsw

from server.activity import approvals, control, idempotency, landed, provenance, unrecorded
from server.activity.agent_session import AgentSession
from server.activity.ratelimit import Slot, Unmetered
from server.config.review import ReviewPolicy
from server.config.review import policy as review_policy
from server.config.session_contract import SessionConfig, Tier
from server.errors import KmsError, validate_input
from server.store.db import shared_commit, thread_connection
from server.store.health import UNUSABLE, database_error
from server.vault import git_units
from server.writes import git_step, reindex, unit_journal
from server.writes.context import ModelSource, Touched, WriteContext, lock_dir_for
from server.writes.held_call import POLL_S, Staged, planted_reasons, refusal, staged_answer
from server.writes.limits import MAX_NOTE_NAME_CHARS, MAX_TITLE_CHARS
from server.writes.outcome import WriteOutcome
from server.writes.record import record_call, text_argument
from server.writes.staging import Capture, Expected

if TYPE_CHECKING:  # the dashboard imports this module (revert records through it): no pydantic for it
    from pydantic import BaseModel


class WriteTool(Protocol):
    """What the guard needs from a registry entry (``ToolSpec`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def tier(self) -> Tier: ...

    @property
    def input_model(self) -> type[BaseModel]: ...

    @property
    def handler(self) -> Callable[[WriteContext, Any], WriteOutcome]: ...


APPROVAL_MODES = ("off", "bulk", "always")


class WriteService:
    """Guarded writes for one agent session: its rules come from the session, the model (for
    ``kms_remember``) from the process. Shared by threads: each gets its own APSW connection."""

    def __init__(self, session: AgentSession, model: ModelSource | None = None, *, actor: str = "agent") -> None:
        if session.config.approval not in APPROVAL_MODES:
            raise ValueError(f"approval must be one of {APPROVAL_MODES}, not {session.config.approval!r}")
        self.session, self.model, self.actor = session, model, actor  # actor: the agent, or kms's session capture
        self.lock_dir = lock_dir_for(self.conn())  # the database's own lock folder, once

    @classmethod
    def for_detached(
        cls, item: approvals.Pending, db_path: str | Path, model: ModelSource | None = None, *, actor: str = "agent"
    ) -> WriteService:
        """The guard of the session a detached call was staged in, rebuilt from its row in any process (over
        ``db_path``, this process's database): the same identity, vault, tiers, allowlist and token folders.
        Its limiter counts nothing: the agent's slot was taken when the call was staged. ``actor``: the
        writer its row names (``capture`` for kms's own session note)."""
        if item.session is None:
            raise KmsError("invalid-input", f"pending change #{item.id} was not staged detached")
        config = SessionConfig.from_snapshot(item.session, db_path=Path(db_path), watch=False)
        return cls(AgentSession.open(config, limits=Unmetered()), model, actor=actor)

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def lists_landed(self) -> bool:
        """Whether this session's writes are listed for review once landed (``review.mode = after``); kms's own
        writes on its behalf (the session note) are not the agent's."""
        return self.actor == "agent" and self.review.mode == "after"

    @property
    def detached(self) -> bool:
        """Whether this session's staged calls are answered at once (``SessionConfig.review_detached``)."""
        return self.session.config.review_detached

    @property
    def approval_timeout(self) -> float:
        return float(self.session.config.approval_timeout)

    def conn(self) -> apsw.Connection:
        """This thread's connection (never shared across threads)."""
        return thread_connection(self.session.config.db_path)

    def context(
        self, conn: apsw.Connection, touched: Touched, *, staging: Capture | Expected | None = None, slots: bool = True
    ) -> WriteContext:
        """The one write context of a call: the session's scope, allowlist, limits and identity; the session's
        reads and searches so far are put on record first (a session note lists them)."""
        self.session.reads.flush()
        c = self.session.config
        return WriteContext(
            conn,
            self.lock_dir,
            self.session.allowlist,
            c.vault_names,
            c.max_files_per_call,
            self.session_id,
            c.memory_folder,
            self.session.identity,
            self.model,
            staging,
            touched,
            (lambda: self._extra_slot(conn)) if slots else None,
            capture_folder=c.capture_folder if c.capture_enabled else None,
            put_back=[],  # (taken back by ``run`` should the database fail)
            index_after=[],  # what the operation writes is indexed once it returns (``reindex.flush``)
        )

    def recover_units(self) -> None:
        """Undo what a dead writer left half done (``unit_journal.recover``): before every write call, and
        when a server with writes starts. Cheap when there is nothing (one folder listing)."""
        try:
            unit_journal.recover(self.conn(), self.lock_dir)
        except (apsw.Error, OSError):  # tried again at the next call; the write itself goes on
            logging.getLogger("kms.writes").exception("could not finish a unit a dead writer left")

    def allows(self, tier: Tier) -> bool:
        """Whether this session's gate lets a tool of ``tier`` run."""
        return self.session.allows(tier)

    def _extra_slot(self, conn: apsw.Connection) -> Callable[[], None]:
        limits = self.session.limits
        slot = limits.acquire(conn, self.session_id)
        return lambda: limits.release(conn, slot)

    def counters(self) -> dict[str, Any]:
        """This session's live write counters."""
        return self.session.limits.counters(self.conn(), self.session_id)

    def _gate(self, conn: apsw.Connection, tool: WriteTool) -> None:
        """Step 1: the tier's switch, then the session's live state (one indexed lookup)."""
        if not self.allows(tool.tier):
            raise KmsError("feature-disabled", self.session.disabled_message(tool.name, tool.tier))
        refused = control.refusal(conn, self.session_id)
        if refused is not None:
            raise refused

    def _record(
        self,
        conn: apsw.Connection,
        tool: WriteTool,
        arguments: Mapping[str, Any],
        touched: Touched,
        outcome: WriteOutcome | None,
        failure: BaseException | None,
        message: str | None = None,
    ) -> int:
        key = arguments.get(idempotency.KEY_FIELD)
        keyed = isinstance(key, str) and outcome is not None
        return record_call(
            conn,
            tool=tool.name,
            session_id=self.session_id,
            input_summary=provenance.summarize_input(dict(arguments)),
            touched=touched,
            outcome=outcome,
            failure=failure,
            actor=self.actor,
            message=message,
            idempotency_key=key if keyed else None,
            answer=idempotency.answer_json(tool.name, arguments, outcome.result)
            if keyed and outcome is not None
            else None,
        )

    def call(self, tool: WriteTool, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one write-tool call through the whole guard; return the agent's result or raise ``KmsError``.
        A call that needs approval blocks this thread until the person decides (the MCP adapter waits
        asynchronously instead: ``stage``, then ``settle``)."""
        staged = self.stage(tool, arguments)
        if staged is None:
            return self.run(tool, arguments)
        if staged.detached:
            return staged_answer(staged, self.session.config.review_url)
        return self.settle(tool, arguments, staged, self.wait(staged, time.sleep))

    def wait(self, staged: Staged, sleep: Callable[[float], object]) -> approvals.Pending:
        """Block until the person decides or the call's time runs out."""
        while (item := self.decision(staged)) is None:
            sleep(POLL_S)
        return item

    def decision(self, staged: Staged) -> approvals.Pending | None:
        """The person's decision on a staged call (or its expiry), None while it still waits."""
        item = approvals.poll(self.conn(), staged.id, now=self.session.clock())
        return None if item.status == approvals.OPEN else item

    @property
    def review(self) -> ReviewPolicy:
        """This session's review mode and thresholds (``server.config.review``: ``review.*``, ``write.approval``)."""
        return review_policy(self.session.config)

    def stage(self, tool: WriteTool, arguments: Mapping[str, Any], asking_host: bool = False) -> Staged | None:
        """Stage the call for the person's approval (``asking_host``: the host asks too), or None when it needs none
        (``review.mode`` is not ``before`` and the call is within ``review.max_lines`` / ``review.max_files``,
        or nothing would change).
        A call whose text looks like instructions planted for an agent (``planted_reasons``) is staged
        whatever the approval mode, with its reasons: a note or a memory fact must not steer a later agent
        unless the person let it in.
        A call refused before it could be shown (gate, paused, bad input, the operation's own refusal)
        is recorded and raised here: it never runs unapproved."""
        c = self.session.config
        why = planted_reasons(arguments)
        review = self.review
        if not why and review.mode != "before" and not review.has_threshold:
            return None  # nothing could make it wait: not even previewed
        conn = self.conn()
        if self._replayable(conn, tool, arguments):
            return None  # a retry of a call already applied: ``run`` answers it, nothing is staged
        if c.review_detached and isinstance(arguments.get(idempotency.KEY_FIELD), str):
            same = approvals.waiting_same(conn, self.session_id, tool.name, dict(arguments))
            if same is not None:  # a retry of a keyed call still waiting: the same ticket, not a second one
                return Staged.of(same)
        cap = Capture()
        ctx = self.context(
            conn, Touched(note_id=text_argument(arguments.get("noteId"), MAX_NOTE_NAME_CHARS)), staging=cap, slots=False
        )
        try:
            self._gate(conn, tool)
            args = validate_input(tool.input_model, arguments)
            tool.handler(ctx, args)
        except Exception as e:
            if not isinstance(e, apsw.Error):  # (a database failure is the dispatcher's to answer)
                self._record(conn, tool, arguments, ctx.touched, None, e)
            raise
        waits = bool(why) or review.mode == "before" or review.above(len(cap.files), cap.lines)
        if not cap.files or not waits:
            return None
        now = self.session.clock()
        detached = c.review_detached
        # a detached call waits days, not an agent's call's seconds (``DETACHED_WAIT_S``); kms's own session
        # note, whose service sets a longer ``approval_timeout``, keeps that
        timeout = max(approvals.DETACHED_WAIT_S, self.approval_timeout) if detached else self.approval_timeout
        if detached:  # the agent's write slot, now: its call ends here (a refusal is recorded and raised)
            try:
                self.session.limits.acquire(conn, self.session_id)
            except KmsError as e:
                self._record(conn, tool, arguments, ctx.touched, None, e)
                raise
        pending_id = approvals.stage(
            conn,
            session_id=self.session_id,
            tool=tool.name,
            arguments=dict(arguments),
            input_summary=provenance.summarize_input(dict(arguments)),
            files=[f.to_json() for f in cap.files],
            lines=cap.lines,
            timeout_s=timeout,
            asking_host=asking_host and not detached,
            now=now,
            why=why,
            session=c.snapshot() if detached else None,
        )
        return Staged(pending_id, tuple(cap.files), now + timeout, tuple(why), detached)

    def settle(
        self, tool: WriteTool, arguments: Mapping[str, Any], staged: Staged, decision: approvals.Pending
    ) -> dict[str, Any]:
        """The end of a staged call: applied exactly as shown when approved, else refused and recorded."""
        if decision.status == "approved":
            return self.run(tool, arguments, pending=decision, expected=Expected.of(staged.files))
        conn = self.conn()
        err = refusal(staged, decision, self.approval_timeout)
        first = next((f for f in staged.files if not f.hidden), None)
        touched = Touched(
            note_id=text_argument(arguments.get("noteId"), MAX_NOTE_NAME_CHARS),
            vault=first.vault if first else None,
            path=first.path if first else None,
        )
        invocation_id = self._record(conn, tool, arguments, touched, None, err)
        approvals.finish(conn, staged.id, invocation_id=invocation_id, outcome=err.kind)
        raise err

    def abandon(self, tool: WriteTool, arguments: Mapping[str, Any], staged: Staged) -> None:
        """The caller stopped waiting (the host cancelled the call, the server is stopping): the staged call
        can no longer be approved, and it is recorded as cancelled, nothing written."""
        conn = self.conn()
        if not approvals.cancel(conn, staged.id, now=self.session.clock()):
            return  # decided or expired just now: nobody will apply it either, but the decision stands
        err = KmsError(
            "cancelled",
            "the call was cancelled while it waited for the person's approval; nothing was written",
            pendingId=staged.id,
        )
        touched = Touched(note_id=text_argument(arguments.get("noteId"), MAX_NOTE_NAME_CHARS))
        invocation_id = self._record(conn, tool, arguments, touched, None, err)
        approvals.finish(conn, staged.id, invocation_id=invocation_id, outcome=err.kind)

    def _replayable(self, conn: apsw.Connection, tool: WriteTool, arguments: Mapping[str, Any]) -> bool:
        """Whether this call carries an idempotency key its session already used (``idempotency``)."""
        key = arguments.get(idempotency.KEY_FIELD)
        if not isinstance(key, str):
            return False
        try:
            return idempotency.replay(conn, self.session_id, tool.name, key, arguments) is not None
        except KmsError:
            return True  # (refused by ``run``, which records it)

    def _replay(self, conn: apsw.Connection, tool: WriteTool, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """A retry of a call this session made with the same idempotency key: the first call's answer, and a
        row saying so; nothing is written. None when the call must run (no key, a new one, or refused at the
        gate or by its input: the guard's own path records those)."""
        key = arguments.get(idempotency.KEY_FIELD)
        if not isinstance(key, str):
            return None
        try:
            self._gate(conn, tool)
            validate_input(tool.input_model, arguments)
        except KmsError:
            return None
        try:
            answer = idempotency.replay(conn, self.session_id, tool.name, key, arguments)
        except KmsError as e:
            self._record(conn, tool, arguments, Touched(), None, e)
            raise
        if answer is not None:
            touched = Touched(answer.get("noteId"), answer.get("vault"), answer.get("path"), answer.get("title"))
            self._record(
                conn,
                tool,
                arguments,
                touched,
                None,
                None,
                message=f"a retry of #{answer['invocationId']} (same idempotencyKey): answered from it, "
                "nothing written",
            )
        return answer

    def run(
        self,
        tool: WriteTool,
        arguments: Mapping[str, Any],
        *,
        pending: approvals.Pending | None = None,
        expected: Expected | None = None,
    ) -> dict[str, Any]:
        """Steps 1-5 for one call (``pending``: a call the person approved, to apply exactly as ``expected``)."""
        conn = self.conn()
        self.recover_units()  # first: a retry is answered from, or applied on, what a dead writer left finished
        if pending is None and (replayed := self._replay(conn, tool, arguments)) is not None:
            return replayed
        limits = self.session.limits
        ctx = self.context(
            conn,
            Touched(
                note_id=text_argument(arguments.get("noteId"), MAX_NOTE_NAME_CHARS),
                title=text_argument(arguments.get("title"), MAX_TITLE_CHARS),
            ),
            staging=expected,
        )
        if isinstance(key := arguments.get(idempotency.KEY_FIELD), str):  # journaled: ``server.writes.once``
            ctx.once_call = idempotency.call_id(self.session_id, key)
        slot: Slot | None = None
        outcome: WriteOutcome | None = None
        failure: BaseException | None = None
        with contextlib.suppress(apsw.Error):  # calls a full database could not record, now there is room
            unrecorded.replay(conn)
        try:
            with contextlib.ExitStack() as group:
                try:
                    if pending is None:
                        self._gate(conn, tool)
                    elif (refused := control.refusal(conn, self.session_id)) and refused.kind == "revoked":
                        raise refused  # approved, but the session was revoked before it could land
                    args = validate_input(tool.input_model, arguments)
                    slot = limits.acquire(conn, self.session_id)  # committed before the file is touched
                    # the index update and the provenance record then share one commit; the file lock is
                    # released before the first of them takes the database lock (never the other order)
                    group.enter_context(shared_commit(conn))
                    done = tool.handler(ctx, args)
                    reindex.flush(ctx)  # what it wrote, indexed once, in this commit, before its row
                    outcome = done
                except BaseException as e:
                    failure = e
                    if not isinstance(e, UNUSABLE):  # (a database failure: the files are put back, below)
                        reindex.flush(ctx)  # what it wrote before it failed
                    raise
                finally:
                    if slot is not None and (outcome is None or not outcome.changed):
                        limits.release(conn, slot)  # a failed write or an idempotent no-op is not a write
                    if not isinstance(failure, UNUSABLE):  # (the database failed: kept beside it, below)
                        invocation_id = self._record(
                            conn,
                            tool,
                            arguments,
                            ctx.touched,
                            outcome,
                            failure,
                            message=None if pending is None else pending.decided_words(),
                        )
                        if pending is None and outcome is not None and outcome.changed and self.lists_landed:
                            landed.note(conn, invocation_id, self.session_id)  # review.mode = after
                        if pending is not None:
                            approvals.finish(
                                conn,
                                pending.id,
                                invocation_id=invocation_id,
                                outcome="applied" if outcome is not None else getattr(failure, "kind", "internal"),
                            )
        except apsw.Error as e:  # nothing is changed (the notes go back): the refusal is owed a row
            ctx.take_back()  # every file the call changed, as kms read it (``context.undone_unless_recorded``)
            err = database_error(e, conn.filename)
            t = ctx.touched
            unrecorded.keep(
                conn.filename,
                tool=tool.name,
                session_id=self.session_id,
                input_summary=provenance.summarize_input(dict(arguments)),
                status=provenance.status_for(err.kind),
                note_id=t.note_id,
                vault=t.vault,
                path=t.path,
                title=t.title,
                error=err.kind,
                message=f"{err.message} (the note was left as it was)",
            )
            raise
        assert outcome is not None
        if ctx.landed:  # a vault in git mode: the unit is one commit (``git_step``; nothing for other vaults)
            approver = "none" if pending is None else pending.decided_words()
            author = git_units.agent_identity(self.session_id, self.session.identity.project or self.actor)
            git_step.keep_unit(
                conn, ctx.landed, git_units.Unit(invocation_id, self.session_id, tool.name, approver, author)
            )
        return {**outcome.result, "invocationId": invocation_id}
