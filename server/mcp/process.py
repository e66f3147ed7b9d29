"""What a serving process owns once, whatever number of sessions it serves.

``ProcessServices`` holds the process-wide services, typed: the semantic model and its vector
matrix (``LazySemanticService``), the watcher's state, and the heartbeat that reports every live
session into the ``sessions`` table. Everything per session (config, limits, identity, reads)
is an ``AgentSession`` (``server.activity.agent_session``); a ``ToolRunner`` pairs one session with
these services. ``kms mcp`` builds one ``ProcessServices`` for its one session; a process serving
many sessions builds one for all of them (``server.mcp.hub``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.activity.agent_session import AgentSession
from server.activity.ratelimit import record_limits
from server.activity.session_registry import end_session, get_session, touch_session
from server.config.session_contract import SessionConfig
from server.store.db import connect

if TYPE_CHECKING:
    from server.index.semantic import SemanticService

log = logging.getLogger("kms.session")
HEARTBEAT_SECONDS = 15


class LazySemanticService:
    """Builds the ``SemanticService`` on first use or in ``start()``'s thread, not at server start:
    importing it (numpy, the embedding pipeline) must not delay ``tools/list``. A search by meaning starts
    the model if nothing did (``kms mcp`` leaves it to the first such search: a session that never searches
    by meaning never pays for the model; the service preloads it once for every session)."""

    def __init__(self, db_path: Path, *, model_dir: str | None, enabled: bool, download: bool) -> None:
        self.db_path = db_path
        self._options = {"model_dir": model_dir, "enabled": enabled, "download": download}
        self._service: SemanticService | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._started = False
        self._wanted = False  # start() was called: "starting" until the model's own state says more

    @classmethod
    def for_config(cls, config: SessionConfig) -> LazySemanticService:
        return cls(
            config.db_path,
            model_dir=config.embed_model_dir,
            enabled=config.embed_enabled,
            download=config.embed_download,
        )

    def get(self) -> SemanticService:
        with self._lock:
            if self._service is None:
                # deferred: semantic search loads numpy: only when a session asks for it
                from server.index.semantic import SemanticService

                self._service = SemanticService(self.db_path, **self._options)  # type: ignore[arg-type]
            return self._service

    def start(self) -> None:
        """Build the service and start loading the model, on a thread of its own."""
        self._wanted = True
        threading.Thread(target=self.started, name="kms-semantic-start", daemon=True).start()

    def started(self) -> SemanticService:
        """The service, its model loading (or loaded) and its background embedder running."""
        service = self.get()
        with self._lock:
            begin, self._started = not self._started and not self._closed, True
        if begin:
            service.start()
        return service

    def search(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.started().search(*args, **kwargs)

    def wait_first_call(self) -> None:
        self.started().wait_first_call()

    def status(self) -> dict[str, Any]:
        return self.get().status()

    @property
    def embedder(self) -> Any:
        return self.get().embedder

    @property
    def index(self) -> Any:
        return self.get().index

    def ready_embedder(self) -> Any:
        """The loaded model, or None while there is none (never builds the service or waits for it)."""
        service = self._service
        return service.embedder if service is not None and service.embedder.ready else None

    def peek_state(self) -> str:
        """The model's state without building the service: "starting" while a start is on its way, else
        "not-loaded" (it loads at the first search by meaning)."""
        service = self._service
        if service is not None and (self._started or service.embedder.state != "not-loaded"):
            return str(service.embedder.state)
        return "starting" if self._wanted else "not-loaded"

    def notify_changed(self) -> None:
        if self._service is not None:  # nothing to re-embed for before the service exists
            self._service.notify_changed()

    def close(self) -> bool:
        """Stop; False when the model is still loading (the process must then exit without finalising)."""
        self._closed = True
        return self._service.close() if self._service is not None else True


class WatcherState:
    """Whether this process's watcher thread still runs (it stops only on an error it logged)."""

    def __init__(self, thread: threading.Thread) -> None:
        self._thread = thread

    @property
    def running(self) -> bool:
        return self._thread.is_alive()


class Heartbeat:
    """Reports every session this process serves into ``sessions`` (so the dashboard lists it), on one
    thread for all of them, and marks the end of the sessions it opened."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._sessions: dict[str, AgentSession] = {}
        self._created: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, session: AgentSession) -> None:
        """Report ``session`` in now (with its write limits, so the dashboard shows them before its first
        write) and at every beat from now on."""

        conn = connect(self.db_path)
        try:
            created = get_session(conn, session.id) is None
            touch_session(conn, session.id, kind="server", project=session.identity.project)
            if session.allows("write"):
                record_limits(conn, session.id, session.limits)
        finally:
            conn.close()
        with self._lock:
            self._sessions[session.id] = session
            if created:
                self._created.add(session.id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="kms-heartbeat", daemon=True)
                self._thread.start()

    def remove(self, session_id: str) -> None:
        """The session left: a session this process opened is marked ended (a launcher-owned one is ended
        by its launcher, with the agent's exit code)."""
        with self._lock:
            self._sessions.pop(session_id, None)
            created = session_id in self._created
            self._created.discard(session_id)
        if created:
            conn = connect(self.db_path)
            try:
                end_session(conn, session_id, 0)
            finally:
                conn.close()

    def _beat(self) -> None:

        while not self._stop.wait(HEARTBEAT_SECONDS):
            with self._lock:
                ids = list(self._sessions)
            try:
                conn = connect(self.db_path)
                try:
                    for session_id in ids:
                        touch_session(conn, session_id, kind="server")
                finally:
                    conn.close()
            except Exception:  # a missed heartbeat is harmless
                log.debug("heartbeat failed", exc_info=True)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            ids = list(self._sessions)
        for session_id in ids:
            self.remove(session_id)


@dataclass
class ProcessServices:
    """The process-wide services (see the module docstring); ``close()`` reports whether the process may
    exit normally (a model still loading may not be finalised under)."""

    db_path: Path
    semantic: LazySemanticService | None
    heartbeat: Heartbeat
    watcher: WatcherState | None = None
    watch: bool = True  # run a watcher (tests turn it off)
    preload_model: bool = False  # load the model at start (the service), else at the first search by meaning
    _closed: bool = field(default=False, repr=False)

    @classmethod
    def for_config(cls, config: SessionConfig) -> ProcessServices:
        """The services for a process over ``config``'s database and model settings."""
        return cls(
            config.db_path, LazySemanticService.for_config(config), Heartbeat(config.db_path), watch=config.watch
        )

    def notify_changed(self) -> None:
        """Notes changed (a write, the watcher): re-embed them in the background."""
        if self.semantic is not None:
            self.semantic.notify_changed()

    def close(self) -> bool:
        if self._closed:
            return True
        self._closed = True
        self.heartbeat.close()
        return self.semantic.close() if self.semantic is not None else True
