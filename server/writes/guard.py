"""The write guard: the one call every write-tier tool goes through.

``WriteService.call(tool, arguments)`` runs, in this order and nowhere else:

1. gate: the tool's tier (write, edit or organize) is on for this session (else ``feature-disabled``),
   and the person has not paused or revoked the session (``server.activity.control``: ``paused``,
   ``revoked``; read from the database on every call, so a running server obeys at once);
2. input validation: the tool's strict pydantic model (else ``invalid-input``);
3. a rate-limit slot, committed before any file is touched (else ``rate-limited``);
4. the operation, through ``WriteTarget`` (vault scope, allowlist, locks);
5. exactly one provenance row, written in a ``finally`` whatever happened above, with
   the operation's typed change record (``server.activity.changes``).

A slot is given back when the call did not change a file, so the limits count writes.

Approval (``write.approval``: ``bulk`` or ``always``): after validation, ``stage`` runs the operation
once inside ``staging.capture`` (everything computed, nothing written) and, when the call needs the
person, records it in ``pending_writes`` with the exact per-file diff; the caller waits for the
decision (``wait``, or the MCP adapter's asynchronous loop) and ``settle`` then applies it through
steps 3-5 under ``staging.expect`` (the usual compare-and-swap, and every file exactly as shown:
else ``conflict``), or refuses it (``rejected``, ``approval-timeout``). Still one provenance row per call.

Adding a write tool is a registry entry plus an operation: a ``ToolSpec`` in
``server.mcp.tools.write_tools`` (name, input model, description, and a handler
``(target, args) -> WriteOutcome`` that calls the operation) and the operation in
``server.writes.operations`` returning a ``WriteOutcome`` with its change record. This
module, the dispatcher, provenance, revert and the dashboard name no tool.

A ``WriteService`` may be shared by threads: each thread gets its own APSW connection
(``thread_connection``); nothing else is mutable.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import apsw

from server.activity import approvals, control, provenance, unrecorded
from server.activity.ratelimit import RateLimiter, Slot
from server.config.allowlist import Allowlist
from server.config.session import Tier
from server.errors import KmsError, validate_input
from server.store.db import shared_commit, thread_connection
from server.store.health import UNUSABLE, database_error
from server.vault.registry import Vault, get_vault, list_vaults
from server.writes import staging, unit_journal
from server.writes.cas import NoteRef, WriteOutcome, load_note, lock_dir_for, undone_unless_recorded
from server.writes.limits import MAX_NAME_CHARS, MAX_TITLE_CHARS

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
    def handler(self) -> Callable[[WriteTarget, Any], WriteOutcome]: ...


def _off(tool: str) -> str:
    return (f"{tool} is turned off for this session: agents may not write to this vault; a person can turn it "
            "on with `kms config set agent.write true` or `kms claude --write`")


def _text(value: Any, limit: int = 1000) -> str | None:
    """A string argument worth naming in the provenance row (not whatever an agent sent)."""
    return value if isinstance(value, str) and len(value) <= limit else None


APPROVAL_MODES = ("off", "bulk", "always")
POLL_S = 0.1  # how often a waiting call looks at the person's decision (the answer comes within 0.5 s)


@dataclass(frozen=True)
class Staged:
    """A call waiting for the person: its ``pending_writes`` id and the files it was shown to change."""

    id: int
    files: tuple[staging.StagedFile, ...]
    expires_at: float


@dataclass
class Touched:
    """The note a call is about, as far as it got (for its provenance row)."""

    note_id: str | None = None
    vault: str | None = None
    path: str | None = None
    title: str | None = None


@dataclass
class WriteTarget:
    """What an operation may reach during one call: the connection, the session's rules, and note
    and vault lookups that respect the session's vault scope. It remembers what was looked up,
    so the provenance row names the note even when the operation then fails."""

    conn: apsw.Connection
    allowlist: Allowlist
    lock_dir: Path | None
    scope: str | None  # the session's vault: notes of other vaults do not exist for it
    touched: Touched
    max_files: int = 50  # write.max_files_per_call
    extra_slot: Callable[[], Callable[[], None]] | None = None  # one more rate-limit slot; returns its release
    session_id: str = ""  # the calling session (kms_remember keys project memory on its identity)
    memory_folder: str | None = None  # memory.folder: kms_remember's own allowlist entry
    services: Mapping[str, Any] = field(default_factory=dict)  # the server's per-process services, if any

    def take_slot(self) -> Callable[[], None]:
        """One more rate-limit slot for a call that writes several notes (``rate-limited`` when none is
        left); returns the function that gives it back should that note not be written."""
        return self.extra_slot() if self.extra_slot is not None else (lambda: None)

    def check_breadth(self, count: int, what: str = "files") -> None:
        """``too-broad`` (before anything is touched) for a call over ``write.max_files_per_call``."""
        if count > self.max_files:
            raise KmsError("too-broad", f"this call would touch {count} {what}; at most {self.max_files} per call "
                           "(write.max_files_per_call). Nothing was changed.", count=count, limit=self.max_files)

    def note(self, ref: str) -> tuple[NoteRef, Vault]:
        """The note ``ref`` names and its vault; ``not-found`` for a note outside the scope."""
        scope_id = get_vault(self.conn, self.scope).id if self.scope is not None else None
        note, vault = load_note(self.conn, ref, scope_id)  # other vaults' notes are as if absent
        self.touched = Touched(note.id, vault.name, note.path, note.title)
        return note, vault

    def vault(self, name: str | None) -> Vault:
        """The vault a new note goes to: the one named, else the session's, else the only one."""
        if self.scope is not None and name is not None and name != self.scope:
            raise KmsError("invalid-input", f"this session writes only to vault {self.scope!r}, not {name!r}",
                           vault=name)
        name = name or self.scope
        if name:
            vault = get_vault(self.conn, name)
        else:
            vaults = list_vaults(self.conn)
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


class WriteService:
    """Guarded writes for one agent session."""

    def __init__(
        self,
        db_path: str | Path | None,
        session_id: str,
        limits: RateLimiter | None = None,
        allowlist: Allowlist | Iterable[str] | None = None,
        *,
        vault: str | None = None,
        lock_dir: Path | None = None,
        enabled: bool = True,
        disabled_message: Callable[[str], str] | None = None,
        tier_enabled: Callable[[Tier], bool] | None = None,
        max_files: int = 50,
        memory_folder: str | None = None,
        approval: str = "off",
        approval_lines: int = 20,
        approval_timeout: float = 120.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if approval not in APPROVAL_MODES:
            raise ValueError(f"approval must be one of {APPROVAL_MODES}, not {approval!r}")
        self.approval = approval  # write.approval: which calls wait for the person
        self.approval_lines = approval_lines
        self.approval_timeout = approval_timeout
        self.clock = clock  # injectable: the approval deadline is measured on it
        self.memory_folder = memory_folder  # memory.folder: where kms_remember may write, allowlist or not
        self.enabled = enabled  # agent.write off: every call is refused (and recorded) as feature-disabled
        # a tier above write (edit, organize) is gated on its own; None: every tier follows ``enabled``
        self.tier_enabled = tier_enabled
        self.max_files = max_files
        self.disabled_message = disabled_message or _off  # tool name -> why, e.g. which setting is off
        self.db_path = db_path
        self.session_id = session_id
        self.limits = limits if limits is not None else RateLimiter()
        self.allowlist = allowlist if isinstance(allowlist, Allowlist) else Allowlist(allowlist)
        self.vault = vault
        self.lock_dir = lock_dir
        self.services: Mapping[str, Any] = {}  # the server's services (ToolRunner shares its own)

    def conn(self) -> apsw.Connection:
        """This thread's connection (never shared across threads)."""
        return thread_connection(self.db_path)

    def recover_units(self) -> None:
        """Undo what a dead writer left half done (``unit_journal.recover``): before every write call, and
        when a server with writes starts. Cheap when there is nothing (one folder listing)."""
        conn = self.conn()
        try:
            unit_journal.recover(conn, self.lock_dir or lock_dir_for(conn))
        except (apsw.Error, OSError):  # tried again at the next call; the write itself goes on
            logging.getLogger("kms.writes").exception("could not finish a unit a dead writer left")

    def allows(self, tier: Tier) -> bool:
        """Whether this session's gate lets a tool of ``tier`` run."""
        if not self.enabled:
            return False
        return self.tier_enabled(tier) if self.tier_enabled is not None else True

    def _extra_slot(self, conn: apsw.Connection) -> Callable[[], None]:
        slot = self.limits.acquire(conn, self.session_id)
        return lambda: self.limits.release(conn, slot)

    def counters(self) -> dict[str, Any]:
        """This session's live write counters."""
        return self.limits.counters(self.conn(), self.session_id)

    def _gate(self, conn: apsw.Connection, tool: WriteTool) -> None:
        """Step 1: the tier's switch, then the session's live state (one indexed lookup)."""
        if not self.allows(getattr(tool, "tier", "write")):
            raise KmsError("feature-disabled", self.disabled_message(tool.name))
        refused = control.refusal(conn, self.session_id)
        if refused is not None:
            raise refused

    def call(self, tool: WriteTool, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one write-tool call through the whole guard; return the agent's result or raise ``KmsError``.
        A call that needs approval blocks this thread until the person decides (the MCP adapter waits
        asynchronously instead: ``stage``, then ``settle``)."""
        staged = self.stage(tool, arguments)
        if staged is None:
            return self.run(tool, arguments)
        return self.settle(tool, arguments, staged, self.wait(staged, time.sleep))

    def wait(self, staged: Staged, sleep: Callable[[float], object]) -> approvals.Pending:
        """Block until the person decides or the call's time runs out."""
        while (item := self.decision(staged)) is None:
            sleep(POLL_S)
        return item

    def decision(self, staged: Staged) -> approvals.Pending | None:
        """The person's decision on a staged call (or its expiry), None while it still waits."""
        item = approvals.poll(self.conn(), staged.id, now=self.clock())
        return None if item.status == approvals.OPEN else item

    def stage(self, tool: WriteTool, arguments: Mapping[str, Any]) -> Staged | None:
        """Stage the call for the person's approval, or None when it needs none (approval off, or ``bulk``
        and the call touches one file and at most ``approval_lines`` lines, or it would change nothing).
        A call refused before it could be shown (gate, paused, bad input, the operation's own refusal)
        is recorded and raised here: it never runs unapproved."""
        if self.approval == "off":
            return None
        conn = self.conn()
        target = WriteTarget(conn, self.allowlist, self.lock_dir, self.vault,
                             Touched(note_id=_text(arguments.get("noteId"), MAX_NAME_CHARS)), self.max_files, None,
                             self.session_id, self.memory_folder, self.services)
        try:
            self._gate(conn, tool)
            args = validate_input(tool.input_model, arguments)
            with staging.capture() as cap:
                tool.handler(target, args)
        except Exception as e:
            if not isinstance(e, apsw.Error):  # (a database failure is the dispatcher's to answer)
                record_call(conn, tool=tool.name, session_id=self.session_id,
                            input_summary=provenance.summarize_input(dict(arguments)), touched=target.touched,
                            outcome=None, failure=e)
            raise
        if not cap.files or (self.approval == "bulk" and len(cap.files) <= 1 and cap.lines <= self.approval_lines):
            return None
        now = self.clock()
        pending_id = approvals.stage(conn, session_id=self.session_id, tool=tool.name, arguments=dict(arguments),
                                     input_summary=provenance.summarize_input(dict(arguments)),
                                     files=[f.to_json() for f in cap.files], lines=cap.lines,
                                     timeout_s=self.approval_timeout, now=now)
        return Staged(pending_id, tuple(cap.files), now + self.approval_timeout)

    def settle(self, tool: WriteTool, arguments: Mapping[str, Any], staged: Staged,
               decision: approvals.Pending) -> dict[str, Any]:
        """The end of a staged call: applied exactly as shown when approved, else refused and recorded."""
        if decision.status == "approved":
            with staging.expect(staged.files):
                return self.run(tool, arguments, pending=decision)
        conn = self.conn()
        if decision.status == "rejected":
            why = f": {decision.reason}" if decision.reason else ""
            err = KmsError("rejected", f"the person rejected this change{why}; nothing was written",
                           pendingId=staged.id, reason=decision.reason)
        else:
            err = KmsError("approval-timeout", f"the person did not decide within {self.approval_timeout:g} s "
                           "(write.approval_timeout); nothing was written. Ask them to look at the dashboard's "
                           "pending pane, or retry later", pendingId=staged.id)
        first = next((f for f in staged.files if not f.hidden), None)
        touched = Touched(note_id=_text(arguments.get("noteId"), MAX_NAME_CHARS),
                          vault=first.vault if first else None, path=first.path if first else None)
        invocation_id = record_call(conn, tool=tool.name, session_id=self.session_id,
                                    input_summary=provenance.summarize_input(dict(arguments)), touched=touched,
                                    outcome=None, failure=err)
        approvals.finish(conn, staged.id, invocation_id=invocation_id, outcome=err.kind)
        raise err

    def abandon(self, tool: WriteTool, arguments: Mapping[str, Any], staged: Staged) -> None:
        """The caller stopped waiting (the host cancelled the call, the server is stopping): the staged call
        can no longer be approved, and it is recorded as cancelled, nothing written."""
        conn = self.conn()
        if not approvals.cancel(conn, staged.id, now=self.clock()):
            return  # decided or expired just now: nobody will apply it either, but the decision stands
        err = KmsError("cancelled", "the call was cancelled while it waited for the person's approval; nothing "
                       "was written", pendingId=staged.id)
        invocation_id = record_call(conn, tool=tool.name, session_id=self.session_id,
                                    input_summary=provenance.summarize_input(dict(arguments)),
                                    touched=Touched(note_id=_text(arguments.get("noteId"), MAX_NAME_CHARS)),
                                    outcome=None, failure=err)
        approvals.finish(conn, staged.id, invocation_id=invocation_id, outcome=err.kind)

    def run(self, tool: WriteTool, arguments: Mapping[str, Any], *,
            pending: approvals.Pending | None = None) -> dict[str, Any]:
        """Steps 1-5 for one call (``pending``: a call the person approved)."""
        conn = self.conn()
        touched = Touched(note_id=_text(arguments.get("noteId"), MAX_NAME_CHARS),
                          title=_text(arguments.get("title"), MAX_TITLE_CHARS))
        target = WriteTarget(conn, self.allowlist, self.lock_dir, self.vault, touched, self.max_files,
                             lambda: self._extra_slot(conn), self.session_id, self.memory_folder,
                             self.services)
        summary = provenance.summarize_input(dict(arguments))
        slot: Slot | None = None
        outcome: WriteOutcome | None = None
        failure: BaseException | None = None
        with contextlib.suppress(apsw.Error):  # calls a full database could not record, now there is room
            unrecorded.replay(conn)
        self.recover_units()
        try:
            with undone_unless_recorded(), contextlib.ExitStack() as group:
                try:
                    if pending is None:
                        self._gate(conn, tool)
                    elif (refused := control.refusal(conn, self.session_id)) and refused.kind == "revoked":
                        raise refused  # approved, but the session was revoked before it could land
                    args = validate_input(tool.input_model, arguments)
                    slot = self.limits.acquire(conn, self.session_id)  # committed before the file is touched
                    # the index update and the provenance record then share one commit; the file lock is
                    # released before the first of them takes the database lock (never the other order)
                    group.enter_context(shared_commit(conn))
                    outcome = tool.handler(target, args)
                except BaseException as e:
                    failure = e
                    raise
                finally:
                    if slot is not None and (outcome is None or not outcome.changed):
                        self.limits.release(conn, slot)  # a failed write or an idempotent no-op is not a write
                    if not isinstance(failure, UNUSABLE):  # (the database failed: kept beside it, below)
                        invocation_id = record_call(
                            conn, tool=tool.name, session_id=self.session_id, input_summary=summary,
                            touched=target.touched, outcome=outcome, failure=failure,
                            message=None if pending is None else f"approved by the person (pending #{pending.id})",
                        )
                        if pending is not None:
                            approvals.finish(conn, pending.id, invocation_id=invocation_id,
                                             outcome="applied" if outcome is not None else
                                             getattr(failure, "kind", "internal"))
        except apsw.Error as e:  # nothing was changed (the note was put back): the refusal is owed a row
            err = database_error(e, conn.filename)
            unrecorded.keep(conn.filename, tool=tool.name, session_id=self.session_id, input_summary=summary,
                            status=provenance.status_for(err.kind), note_id=target.touched.note_id,
                            vault=target.touched.vault, path=target.touched.path, title=target.touched.title,
                            error=err.kind, message=f"{err.message} (the note was left as it was)")
            raise
        assert outcome is not None
        return {**outcome.result, "invocationId": invocation_id}


def record_call(
    conn: apsw.Connection,
    *,
    tool: str,
    session_id: str,
    input_summary: str,
    touched: Touched,
    outcome: WriteOutcome | None,
    failure: BaseException | None,
    actor: str = "agent",
    message: str | None = None,
    reverts_id: int | None = None,
) -> int:
    """The one provenance row of a write call (an agent's through the guard, a person's revert)."""
    common: dict[str, Any] = {
        "tool": tool, "session_id": session_id, "input_summary": input_summary, "actor": actor,
        "reverts_id": reverts_id, "note_id": touched.note_id,
    }
    if outcome is None:
        if isinstance(failure, (KmsError, *UNUSABLE)):
            err = failure if isinstance(failure, KmsError) else database_error(failure, conn.filename)
            kind, text = err.kind, err.message
            path = touched.path or _text(err.extra.get("path"))
        else:  # a bug: recorded too, then the caller answers "internal"
            kind, path, text = "internal", touched.path, f"{type(failure).__name__}: {failure}"[:1000]
        return provenance.record(
            conn, **common, status=provenance.status_for(kind), vault=touched.vault, path=path,
            title=touched.title, error=kind, message=text,
        )
    result = outcome.result
    common["note_id"] = result.get("noteId") or touched.note_id
    return provenance.record(
        conn, **common, status="success", vault=result.get("vault"), path=result.get("path"),
        title=result.get("title"), message=message or result.get("indexWarning"),
        lines_added=result.get("linesAdded", 0), bytes_before=result.get("bytesBefore"),
        bytes_after=result.get("bytesAfter"), change=outcome.change, hash_before=outcome.hash_before,
        hash_after=outcome.hash_after,
    )
