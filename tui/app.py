"""The dashboard app and its factory, shared by ``kms tui`` and the tests.

Threads and connections: the poller runs in one thread worker with its own APSW
connection for the life of the app; on-demand reads (filters, search, detail,
older pages) and the person's revert run through ``db()`` on the default thread
pool, where each thread has its own cached connection (``thread_connection``).
No connection ever crosses a thread, and the UI thread never waits on SQLite.
"""

from __future__ import annotations

import asyncio
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
from textual.worker import get_current_worker

from server import activity, revert
from server.db import thread_connection
from server.errors import KmsError
from server.settings import default_config_path
from tui.poller import Poller
from tui.screens.dashboard import DashboardScreen
from tui.screens.help import HelpScreen
from tui.screens.invocation import InvocationScreen
from tui.screens.modals import NoteScreen, ReadsScreen, ReviewScreen
from tui.screens.settings import SettingsScreen
from tui.state import DashboardState

T = TypeVar("T")


class KmsDashboard(App[None]):
    """Live view of agent sessions, their writes and reads; review and settings."""

    CSS_PATH = "app.tcss"
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
        self._stop = threading.Event()

    # ----- lifecycle ----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.push_screen(self.dashboard)
        self._poll()

    def on_unmount(self) -> None:
        self._stop.set()

    @work(thread=True, exclusive=True, group="poller", name="poller")
    def _poll(self) -> None:
        """Thread worker: first picture, then cheap polls until the app closes."""
        worker = get_current_worker()
        poller = self.poller = Poller(self.db_path, clock=self.clock, settings_path=self.settings_path)
        try:
            self._post(poller.first())
            while not worker.is_cancelled and not self._stop.wait(self.poll_interval):
                self._post(poller.poll())
        finally:
            poller.close()

    def _post(self, messages: Iterable[Any]) -> None:
        for msg in messages:
            self.dashboard.post_message(msg)

    async def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args)`` on a pool thread with that thread's own connection."""

        def call() -> T:
            return fn(thread_connection(self.db_path), *args, **kwargs)

        return await asyncio.to_thread(call)

    # ----- screens ------------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_settings(self) -> None:
        if isinstance(self.screen, SettingsScreen):
            return
        has_vault = bool(self.state.overview.get("vaults"))

        def saved(changed: bool | None) -> None:
            if changed and self.poller is not None:
                self.poller.settings_changed()

        self.push_screen(SettingsScreen(self.settings_path, has_vault), saved)

    def show_invocation(self, invocation_id: int) -> None:
        self.push_screen(InvocationScreen(self.state, invocation_id))

    @work(group="reads")
    async def show_reads(self, session_id: str) -> None:
        reads = await self.db(activity.session_reads, session_id)
        await self.push_screen(ReadsScreen(session_id, reads, self.clock()))

    @work(group="note")
    async def open_note(self, invocation_id: int) -> None:
        try:
            note = await self.db(activity.read_note, invocation_id)
        except KmsError as e:
            self.notify(e.message, title="Can't open the note", severity="error")
            return
        await self.push_screen(NoteScreen(note))

    @work(group="note")
    async def action_open_read_note(self, note_id: str) -> None:
        try:
            note = await self.db(activity.read_note_by_id, note_id)
        except KmsError as e:
            self.notify(e.message, title="Can't open the note", severity="error")
            return
        await self.push_screen(NoteScreen(note))

    @work(group="note")
    async def edit_note(self, invocation_id: int) -> None:
        try:
            note = await self.db(activity.read_note, invocation_id)
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

    @work(group="revert", exclusive=True)
    async def review_revert(self, invocation_id: int) -> None:
        """Preview, confirm, revert. Every refusal comes from ``server.revert`` with its reason."""
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

    # ----- command palette ----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Settings", "Agent switches, write allowlist and limits", self.action_settings)
        yield SystemCommand("Help", "Keys, symbols and panels", self.action_help)
        if isinstance(screen, DashboardScreen):
            yield SystemCommand("Revert selected write", "Preview, then confirm", screen.action_revert)
            yield SystemCommand("Open selected note", "The note as it is now", screen.action_open_note)
            yield SystemCommand("Reads of session", "Notes the agent read", screen.action_reads)
            yield SystemCommand("Clear filters", "Search, session, tool, status", screen.action_clear_filters)
            yield SystemCommand("Load older rows", "Page back through the provenance", screen.action_load_older)
            for status in activity.STATUSES:
                yield SystemCommand(
                    f"Show only status: {status}", f"Filter the feed to {status} rows",
                    lambda s=status: screen.filters.set_status(s),  # type: ignore[misc]
                )


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
