"""The dashboard app and its factory, shared by ``kms tui`` and the tests.

Threads and connections: the poller runs in one thread worker with its own APSW
connection for the life of the app; on-demand reads (filters, search, detail,
older pages) and the person's revert run through ``db()`` on the default thread
pool, where each thread has its own cached connection (``thread_connection``).
No connection ever crosses a thread, and the UI thread never waits on SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from textual import work
from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from server.activity import approvals, control, feed
from server.activity.session_material import note_of
from server.config.settings import default_config_path
from server.errors import KmsError
from server.store.db import thread_connection
from server.writes import review
from server.writes.undo import revert, undo_session
from tui.poller import Poller
from tui.screens.conflicts import ConflictsScreen
from tui.screens.control import ConfirmScreen, UndoScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.help import HelpScreen
from tui.screens.invocation import InvocationScreen
from tui.screens.modals import NoteScreen, ReadsScreen, ReviewScreen
from tui.screens.note_history import HistoryScreen
from tui.screens.pending import PendingScreen
from tui.screens.service import ServiceScreen
from tui.screens.settings import SettingsScreen
from tui.screens.trash import TrashScreen
from tui.state import DashboardState
from tui.styles import CSS

T = TypeVar("T")


class KmsDashboard(App[None]):
    """Live view of agent sessions, their writes and reads; review and settings."""

    CSS = CSS
    TITLE = "kms"
    SUB_TITLE = "what agents do"

    def __init__(
        self,
        db_path: str | Path,
        *,
        settings_path: Path,
        clock: Callable[[], float] = time.time,
        poll_interval: float = 0.25,
    ) -> None:
        super().__init__()
        self.db_path = str(db_path)
        self.settings_path = settings_path
        self.clock = clock
        self.poll_interval = poll_interval
        self.state = DashboardState(clock)
        self.dashboard = DashboardScreen(self.state)
        self.poller: Poller | None = None
        self.last_revert: dict[str, Any] | KmsError | None = None  # outcome of the latest revert
        self.last_control: Any = None  # outcome of the latest decision, pause/resume/revoke or undo
        self._stop = threading.Event()
        self.story_failed = False  # a step of `kms demo`'s story failed: its error stays on screen

    # ----- lifecycle ----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.push_screen(self.dashboard)
        self._poll()

    def on_unmount(self) -> None:
        self._stop.set()

    @work(thread=True, exclusive=True, group="poller", name="poller")
    def _poll(self) -> None:
        """Thread worker: first picture, then cheap polls until the app closes.

        A database problem (locked past the busy timeout, file gone) is shown once and
        retried every second: the dashboard outlives the hiccup instead of crashing.
        """
        worker = get_current_worker()
        poller = self.poller = Poller(self.db_path, clock=self.clock, settings_path=self.settings_path)
        started, problem = False, ""
        try:
            while not worker.is_cancelled:
                try:
                    self._post(poller.poll() if started else poller.first())
                    started, problem = True, ""
                except Exception as e:  # noqa: BLE001 - any failure: report, reconnect, retry
                    if str(e) != problem:
                        problem = str(e)
                        with contextlib.suppress(RuntimeError):  # the app may be closing
                            self.call_from_thread(self.notify, f"Reading the database failed: {e}", severity="error")
                    poller.close()
                    started = False
                    if self._stop.wait(1.0):
                        break
                    continue
                if self._stop.wait(self.poll_interval):
                    break
        finally:
            poller.close()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A failed on-demand read is shown, not fatal (those workers don't exit the app)."""
        if event.state == WorkerState.ERROR:
            self.notify(f"{event.worker.name or 'worker'} failed: {event.worker.error}", severity="error")

    def _post(self, messages: Iterable[Any]) -> None:
        for msg in messages:
            self.dashboard.post_message(msg)

    async def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args)`` on a pool thread with that thread's own connection."""

        def call() -> T:
            return fn(thread_connection(self.db_path), *args, **kwargs)

        return await asyncio.to_thread(call)

    # ----- screens ------------------------------------------------------------------------------

    def narrate(self, kind: str, text: str) -> None:
        """A line of a scripted story (``kms demo``) as a notification, while it happens; the end stays, and so
        does a failed step (``failed``; ``failed-end``: the story stopped there), as an error."""
        failed = kind in ("failed", "failed-end")
        severity = "error" if failed else "warning" if kind == "denied" else "information"
        timeout = 3600.0 if kind == "end" or failed else 6.0
        title = {
            "step": "Demo: the agent",
            "end": "Demo finished",
            "failed": "Demo: a step failed",
            "failed-end": "Demo stopped",
        }.get(kind, "Demo")
        self.story_failed = self.story_failed or failed  # a failure stays, whatever the story says after it
        if not self.story_failed:  # else one line of the story at a time (its steps are a second apart): a stack
            self.clear_notifications()  # slow to expire on a loaded machine stayed over the Detail pane a minute
        self.notify(text.strip(), title=title, severity=severity, timeout=timeout)  # type: ignore[arg-type]

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_settings(self) -> None:
        if isinstance(self.screen, SettingsScreen):
            return
        has_vault = bool(self.state.overview and self.state.overview.vaults)

        def saved(changed: bool | None) -> None:
            if changed and self.poller is not None:
                self.poller.settings_changed()

        self.push_screen(SettingsScreen(self.settings_path, has_vault), saved)

    def action_trash(self) -> None:
        if not isinstance(self.screen, TrashScreen):
            self.push_screen(TrashScreen())

    def action_conflicts(self) -> None:
        if not isinstance(self.screen, ConflictsScreen):
            self.push_screen(ConflictsScreen())

    def show_history(self, ref: str, vault: str | None = None) -> None:
        """A note's history: its versions, a diff, a restore after a yes (``tui.screens.note_history``)."""
        self.push_screen(HistoryScreen(ref, vault))

    def action_service(self) -> None:
        if not isinstance(self.screen, ServiceScreen):
            self.push_screen(ServiceScreen())

    def show_invocation(self, invocation_id: int) -> None:
        self.push_screen(InvocationScreen(self.state, invocation_id))

    @work(group="reads", exit_on_error=False)
    async def show_reads(self, session_id: str) -> None:
        reads = await self.db(feed.session_reads, session_id)
        await self.push_screen(ReadsScreen(session_id, reads, self.clock()))

    @work(group="note", exit_on_error=False)
    async def open_note(self, invocation_id: int) -> None:
        try:
            note = await self.db(feed.read_note, invocation_id)
        except KmsError as e:
            self.notify(e.message, title="Can't open the note", severity="error")
            return
        await self.push_screen(NoteScreen(note))

    @work(group="note", exit_on_error=False)
    async def action_open_read_note(self, note_id: str) -> None:
        try:
            note = await self.db(feed.read_note_by_id, note_id)
        except KmsError as e:
            self.notify(e.message, title="Can't open the note", severity="error")
            return
        await self.push_screen(NoteScreen(note))

    @work(group="note", exit_on_error=False)
    async def open_session_note(self, session_id: str) -> None:
        """The session note kms wrote for ``session_id`` (docs/hooks.md), opened as any note is."""

        note_id = await self.db(note_of, session_id)
        if note_id is None:
            self.notify(f"Session {session_id} has no session note (yet).", severity="warning")
            return
        try:
            note = await self.db(feed.read_note_by_id, note_id)
        except KmsError as e:
            self.notify(e.message, title="Can't open the session note", severity="error")
            return
        await self.push_screen(NoteScreen(note))

    @work(group="note", exit_on_error=False)
    async def edit_note(self, invocation_id: int) -> None:
        try:
            note = await self.db(feed.read_note, invocation_id)
        except KmsError as e:
            self.notify(e.message, title="Can't open the note", severity="error")
            return
        self.edit_file(note.file)

    def action_edit_file(self) -> None:
        if isinstance(self.screen, NoteScreen):
            self.edit_file(self.screen.note.file)

    def edit_file(self, path: Path) -> None:
        """Hand the terminal to $VISUAL/$EDITOR; the watcher re-indexes what the person saves."""
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            self.notify("Set $EDITOR to edit notes from here; `o` shows the note.", severity="warning")
            return
        if self.is_headless:
            self.notify(f"Would run: {editor} {path}", title="Edit")
            return
        with self.suspend():
            subprocess.call([*shlex.split(editor), str(path)])
        self.refresh()

    # ----- review -------------------------------------------------------------------------------

    @work(group="revert", exclusive=True, exit_on_error=False)
    async def review_revert(self, invocation_id: int) -> None:
        """Preview, confirm, revert. Every refusal comes from ``server.writes.undo.revert`` with its reason."""
        try:
            preview = await self.db(revert.preview_revert, invocation_id)
        except KmsError as e:
            self.last_revert = e
            self.notify(e.message, title=f"Can't revert #{invocation_id}", severity="error", timeout=8)
            return
        if not await self.push_screen_wait(ReviewScreen(preview)):
            return
        try:
            result = await self.db(revert.revert, invocation_id)
        except KmsError as e:
            self.last_revert = e
            self.notify(e.message, title=f"Revert of #{invocation_id} refused", severity="error", timeout=8)
            return
        self.last_revert = result
        self.notify(f"Reverted #{invocation_id} (recorded as #{result['invocationId']}).", title="Reverted")
        if isinstance(self.screen, InvocationScreen):
            await self.screen.reload()

    # ----- the person's controls: approvals, pause/resume/revoke, undo a session ----------------

    def action_pending(self) -> None:
        if not isinstance(self.screen, PendingScreen):
            self.push_screen(PendingScreen(self.state))

    @work(group="control", exit_on_error=False)
    async def decide(self, pending_id: int, approve: bool, reason: str | None) -> None:
        """Approve or reject a waiting call; the server that staged it sees the decision in the database."""
        try:
            done = await self.db(_decide, pending_id, approve, reason)
        except KmsError as e:
            self.last_control = e
            self.notify(e.message, title=f"#{pending_id}", severity="error", timeout=8)
            return
        self.last_control = done
        verb = "Approved" if approve else "Rejected"
        if done.detached:  # nobody waited: applied (or refused) here, the agent sees it with kms_pending
            then = "applied it" if done.outcome == "applied" else "the agent can see it"
        else:
            then = f"the agent's call now {'applies it' if approve else 'is told'}"
        self.notify(f"{verb} #{pending_id} ({done.tool}); {then}.", title=verb)

    @work(group="control", exit_on_error=False)
    async def session_control(self, session_id: str, what: str) -> None:
        """``pause`` (a paused session: resume), ``revoke`` (confirmed) or ``undo`` (preview, confirm)."""
        try:
            if what == "undo":
                await self._undo(session_id)
                return
            if what == "pause":
                current = next((s.control for s in self.state.sessions if s.id == session_id), "active")
                state = "active" if current == "paused" else "paused"
            else:
                question = (
                    f"Revoke session {session_id}? Its writes are refused for the rest of it (reads keep "
                    "working) and its calls waiting for approval are rejected. This cannot be undone."
                )
                if not await self.push_screen_wait(ConfirmScreen("Revoke session", question, "Revoke")):
                    return
                state = "revoked"
            await self.db(control.set_state, session_id, state, channel="dashboard")
        except KmsError as e:
            self.last_control = e
            self.notify(e.message, title=f"Session {session_id}", severity="error", timeout=8)
            return
        self.last_control = (session_id, state)
        said = {"active": "resumed", "paused": "paused: its writes answer `paused`", "revoked": "revoked"}[state]
        self.notify(f"Session {session_id} {said}.", title="Session")

    async def _undo(self, session_id: str) -> None:
        plan = await self.db(undo_session.preview, session_id)
        if not await self.push_screen_wait(UndoScreen(plan, self.clock())) or not (plan["revert"] or plan["outside"]):
            return
        done = await self.db(undo_session.undo, session_id, shown=plan)
        self.last_control = done
        skipped = f"; {len(done['skipped'])} skipped" if done["skipped"] else ""
        restored = f"; restored {len(done['restored'])} note(s) changed outside kms" if done["restored"] else ""
        refused = [f"{n['vault']}:{n['path']}" for n in done["notRestored"]]
        not_restored = f"; not restored: {', '.join(refused)}" if refused else ""
        self.notify(
            f"Reverted {len(done['reverted'])} change(s) of {session_id}{restored}{skipped}{not_restored}.",
            title="Session undone",
            severity="warning" if refused else "information",
        )

    # ----- command palette ----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Settings", "Agent switches, write allowlist and limits", self.action_settings)
        yield SystemCommand("Help", "Keys, symbols and panels", self.action_help)
        yield SystemCommand("Trash", "What agents trashed, from which session; restore one", self.action_trash)
        yield SystemCommand(
            "Conflicts",
            "Notes with two versions from two machines: the diff; keep mine, theirs or both",
            self.action_conflicts,
        )
        yield SystemCommand(
            "Service and tokens", "The kms service, its tokens; revoke one, pause its session", self.action_service
        )
        yield SystemCommand("Pending approvals", "Writes waiting for your approval", self.action_pending)
        if isinstance(screen, DashboardScreen):
            yield SystemCommand("Revert selected write", "Preview, then confirm", screen.action_revert)
            yield SystemCommand("Open selected note", "The note as it is now", screen.action_open_note)
            yield SystemCommand("Reads of session", "Notes the agent read", screen.action_reads)
            yield SystemCommand("Clear filters", "Search, session, tool, status", screen.action_clear_filters)
            yield SystemCommand("Load older rows", "Page back through the provenance", screen.action_load_older)
            for status in feed.STATUSES:
                yield SystemCommand(
                    f"Show only status: {status}",
                    f"Filter the feed to {status} rows",
                    lambda s=status: screen.filters.set_status(s),
                )


def _decide(conn: Any, pending_id: int, approve: bool, reason: str | None) -> approvals.Pending:
    """The dashboard's decision (``review.decide_pending``, channel ``dashboard``), then the call as it is now.
    The MCP registry is imported here, at the first decision, not at the dashboard's start (it loads pydantic):
    a detached call is applied with its write tool in this process (``server.writes.appliers``)."""
    # deferred: the MCP registry (pydantic) at the first decision, not at the dashboard's start
    import server.mcp.tools  # noqa: F401

    review.decide_pending(conn, pending_id, approve, channel="dashboard", reason=reason or "")
    found = approvals.get(conn, pending_id)
    assert found is not None
    return found


def create_app(
    db_path: str | Path,
    *,
    settings_path: str | Path | None = None,
    clock: Callable[[], float] | None = None,
    poll_interval: float = 0.25,
) -> KmsDashboard:
    """The dashboard for ``db_path``; ``settings_path`` defaults to kms's config file,
    ``clock`` (wall seconds) is injectable so tests and snapshots are deterministic."""
    return KmsDashboard(
        db_path,
        settings_path=Path(settings_path) if settings_path is not None else default_config_path(),
        clock=clock or time.time,
        poll_interval=poll_interval,
    )
