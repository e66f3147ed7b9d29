"""The kms service: one long-lived process per database serving every session over Streamable HTTP.

``run(options)`` is ``kms serve``: one ``ProcessServices`` (the watcher, the embedding model, the heartbeat)
and one ``SessionHub`` for every token session, the HTTP app of ``server.mcp.http`` under uvicorn on
loopback sockets (127.0.0.1, and ::1 where the machine has IPv6), a state file while it runs.

The state file (``server.mcp.service_state``: ``<database folder>/service/state.json``) names the running
instance; ``kms service`` reads it to find, stop or replace the instance. The service's log goes beside it
(``service.log``).

One service per database, for good: the serving process holds an exclusive ``flock`` on ``service.lock``
beside the state file from before it binds until it exits (the OS lets go of it however the process ends), so
two starts at once cannot both serve; the loser is told who holds it (``hold_lock``). SIGTERM (``kms service
stop``, systemd) and SIGINT (Ctrl-C) both end in ``run``'s one cleanup: sessions ended, their ``session``
tokens revoked, the state file removed, exit code 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server import installed_version
from server.activity import review_access, tokens
from server.mcp.service_state import (
    ServiceState as ServiceState,
)
from server.mcp.service_state import (
    StateCheck as StateCheck,
)
from server.mcp.service_state import (  # the state file's own module; named here too, for kms service's callers
    check_state as check_state,
)
from server.mcp.service_state import (
    clear_state as clear_state,
)
from server.mcp.service_state import (
    health as health,
)
from server.mcp.service_state import (
    hold_lock as hold_lock,
)
from server.mcp.service_state import (
    is_service as is_service,
)
from server.mcp.service_state import (
    lock_holder as lock_holder,
)
from server.mcp.service_state import (
    lock_path as lock_path,
)
from server.mcp.service_state import (
    log_path as log_path,
)
from server.mcp.service_state import (
    process_start as process_start,
)
from server.mcp.service_state import (
    read_state as read_state,
)
from server.mcp.service_state import (
    running_pages as running_pages,
)
from server.mcp.service_state import (
    session_pages as session_pages,
)
from server.mcp.service_state import (
    state_path as state_path,
)
from server.mcp.service_state import (
    write_state as write_state,
)
from server.store.db import connect

if TYPE_CHECKING:  # the hub (and the SDK behind it) is imported only when the service runs
    from server.mcp.hub import SessionHub

log = logging.getLogger("kms.service")
DEFAULT_PORT = 8765
SWEEP_S = 2.0  # how often sessions of revoked or expired tokens are ended
LOOPBACK_V4, LOOPBACK_V6 = "127.0.0.1", "::1"


def loopback_sockets(port: int, host: str | None) -> list[socket.socket]:
    """Listening sockets: ``host`` alone when given, else 127.0.0.1 and (where there is one) ::1, one port."""
    hosts = [host] if host else [LOOPBACK_V4, LOOPBACK_V6]
    out: list[socket.socket] = []
    for h in hosts:
        family = socket.AF_INET6 if ":" in h else socket.AF_INET
        try:  # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say so (Nagle stalls replies)
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        except OSError:  # no IPv6 here
            continue
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind((h, port))
        except OSError:
            sock.close()
            if h == LOOPBACK_V6 and out:
                continue  # IPv4 loopback is enough
            raise
        port = port or sock.getsockname()[1]  # the IPv6 socket takes the port the first one got
        sock.listen(128)
        sock.setblocking(False)
        out.append(sock)
    return out


def run(
    db_path: Path,
    *,
    port: int = DEFAULT_PORT,
    host: str | None = None,
    on_ready: Any = None,
    stop: threading.Event | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT (or ``stop``). Returns the exit code: 0 however it was asked to stop.
    Refused at once (``already-exists``) while another process holds this database's service lock."""
    lock = hold_lock(db_path, port)
    stop_event = stop or threading.Event()
    try:
        with stop_on_signals(stop_event):
            return _serve_locked(db_path, port=port, host=host, on_ready=on_ready, stop_event=stop_event)
    finally:
        os.close(lock)  # after the state file is gone: a start that gets the lock next finds none


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # SIGHUP: the terminal of `kms serve` closed


@contextlib.contextmanager
def stop_on_signals(stop_event: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop_event`` while the service runs and cleans up (main thread only, where
    signals are delivered). uvicorn puts its own handlers in while it serves, then puts back the ones it found
    (these) and raises again the signal it caught: with Python's defaults there, SIGTERM killed the process
    before its cleanup ran (SIGINT raised KeyboardInterrupt in the middle of it); with these, it only sets an
    event already set. A second SIGINT while serving still forces uvicorn's exit (its own handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda _sig, _frame: stop_event.set()) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def end_sessions(hub: SessionHub) -> bool:
    """The service's sessions end (their rows marked ended by the heartbeat that opened them) and the ``session``
    tokens they were reached through are revoked; whether the process may exit normally (``close_all``)."""
    served = [runner.session.id for runner in hub.sessions()]
    settled = hub.close_all()
    try:
        conn = connect(hub.services.db_path)
        try:
            tokens.revoke_session_tokens(conn, served)
        finally:
            conn.close()
    except Exception:  # the DB busy or gone: they still lapse by themselves (tokens.SESSION_LEASE_S)
        log.exception("could not revoke the session tokens of %d session(s)", len(served))
    return settled


def _serve_locked(db_path: Path, *, port: int, host: str | None, on_ready: Any, stop_event: threading.Event) -> int:
    # deferred: uvicorn, the SDK and the HTTP app only in the service process; kms hook's launcher imports this module
    import anyio
    import uvicorn

    # deferred: the service's own modules (the hub, the HTTP app, the tools) only in the service process
    from server.config.session_contract import SessionConfig
    from server.mcp.http import service_app
    from server.mcp.http_guard import read_timeout_s, uvicorn_options
    from server.mcp.hub import SessionHub
    from server.mcp.process import ProcessServices
    from server.mcp.remote.listener import RemoteListener
    from server.mcp.serve import start_background
    from server.web import review_mount

    base = SessionConfig.from_env(session_id="service")
    services = ProcessServices.for_config(base)
    services.preload_model = True  # one model for every session, loaded once the service answers
    hub = SessionHub(services, settings=lambda sid: SessionConfig.from_env(session_id=sid))
    sockets = loopback_sockets(port, host)
    bound = sockets[0].getsockname()
    timeout = read_timeout_s()
    app = service_app(hub, host=bound[0], port=bound[1], read_timeout=timeout)
    limits = uvicorn_options(timeout)  # the request head's deadline and size (server.mcp.http_guard)
    start_rest = start_background(hub, stop_event)  # the watcher now; the model once the service answers
    config = uvicorn.Config(  # no proxy headers: every client is local, and none may claim another address
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3, proxy_headers=False, **limits
    )
    server = uvicorn.Server(config)
    state = ServiceState(
        os.getpid(),
        bound[0],
        bound[1],
        installed_version() or "0",
        str(db_path),
        time.time(),
        process_start(os.getpid()),
    )
    write_state(db_path, state)

    def announce(settings: Any, error: str | None) -> None:  # the state file says whether remote mode listens
        nonlocal state
        url, port = (settings.issuer, settings.port) if settings is not None else (None, None)
        state = dataclasses.replace(state, remote_url=url, remote_port=port, remote_error=error)
        hub.public_pages = review_access.pages_url(url) if url else None  # what a remote grant's session names
        write_state(db_path, state)

    remote = RemoteListener(
        hub,
        bind=lambda p: loopback_sockets(p, None),  # loopback only, whatever --host the local listener has
        announce=announce,
        uvicorn_options=limits,
        # the review pages on the public origin too: for paired devices only (docs/review.md)
        extra_public_routes=[review_mount(public=True, db_path=hub.services.db_path)],
    )

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def watch_stop() -> None:
                last_sweep = time.monotonic()
                rest_started = False
                while not stop_event.is_set() and not server.should_exit:
                    await anyio.sleep(0.1)
                    if not rest_started and server.started:  # the model loads once, for every session
                        rest_started = True
                        start_rest()
                    if time.monotonic() - last_sweep >= SWEEP_S:
                        last_sweep = time.monotonic()
                        try:  # sessions of revoked or expired tokens end (the dashboard shows it)
                            await anyio.to_thread.run_sync(hub.close_ended_tokens)
                        except Exception:
                            log.exception("could not sweep ended token sessions")
                server.should_exit = True

            tg.start_soon(watch_stop)
            tg.start_soon(remote.follow, lambda: stop_event.is_set() or server.should_exit)
            if on_ready is not None:
                on_ready(state)
            await server.serve(sockets=sockets)
            stop_event.set()

    try:
        anyio.run(main)
    finally:
        stop_event.set()
        clear_state(db_path, state.pid)
        settled = end_sessions(hub)
        for sock in sockets:
            sock.close()
    if not settled:
        os._exit(0)  # a model still loading: finalising under onnxruntime would abort
    return 0
