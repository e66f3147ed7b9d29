"""The kms service: one long-lived process per database serving every session over Streamable HTTP.

``run(options)`` is ``kms serve``: one ``ProcessServices`` (the watcher, the embedding model, the heartbeat)
and one ``SessionHub`` for every token session, the HTTP app of ``server.mcp.http`` under uvicorn on
loopback sockets (127.0.0.1, and ::1 where the machine has IPv6), a state file while it runs.

The state file (``<database folder>/service/state.json``, 0600 in a 0700 folder) names the running
instance: pid, the process's start time, host, port, version, database. ``kms service`` reads it to find,
stop or replace the instance, and trusts it only for the process it names (``check_state``); it holds no
secret. The service's log goes beside it (``service.log``).

One service per database, for good: the serving process holds an exclusive ``flock`` on ``service.lock``
beside the state file from before it binds until it exits (the OS lets go of it however the process ends), so
two starts at once cannot both serve; the loser is told who holds it (``hold_lock``). SIGTERM (``kms service
stop``, systemd) and SIGINT (Ctrl-C) both end in ``run``'s one cleanup: sessions ended, their ``session``
tokens revoked, the state file removed, exit code 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server import installed_version
from server.activity import review_access, tokens
from server.activity.session_registry import pid_alive
from server.errors import KmsError
from server.store.db import connect, service_folder

if TYPE_CHECKING:  # the hub (and the SDK behind it) is imported only when the service runs
    from server.config.session_contract import SessionConfig
    from server.mcp.hub import SessionHub

log = logging.getLogger("kms.service")
DEFAULT_PORT = 8765
SWEEP_S = 2.0  # how often sessions of revoked or expired tokens are ended
LOOPBACK_V4, LOOPBACK_V6 = "127.0.0.1", "::1"


@dataclass(frozen=True)
class ServiceState:
    """The running instance, as its state file says."""

    pid: int
    host: str
    port: int
    version: str
    db_path: str
    started_at: float
    proc_start: str | None = None  # the OS's start time of ``pid`` (``process_start``): None in older files
    remote_url: str | None = None  # the remote listener's public address while it is open (docs/remote.md)
    remote_port: int | None = None  # its loopback port
    remote_error: str | None = None  # why it could not open (the port taken), for ``kms remote status|doctor``

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.origin}/mcp"

    @property
    def pages_url(self) -> str:
        """Where this instance serves the review pages (``server.web``) on loopback."""
        return review_access.pages_url(self.origin)


def state_path(db_path: Path) -> Path:
    return service_folder(db_path) / "state.json"


def log_path(db_path: Path) -> Path:
    return service_folder(db_path) / "service.log"


def lock_path(db_path: Path) -> Path:
    return service_folder(db_path) / "service.lock"


def hold_lock(db_path: Path, port: int) -> int:
    """Take the database's service lock for this process's lifetime (its fd, to close at the very end), and
    write who holds it (pid, port) into it. Held already: ``already-exists``, naming the holder. A lock, not a
    look at the state file, since two starts at once both find no state file (a check-then-act race)."""
    fd = os.open(lock_path(db_path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        holder = lock_holder(db_path)
        where = f" (pid {holder[0]}, port {holder[1]})" if holder else ""
        raise KmsError(
            "already-exists",
            f"a kms service is starting or running for this database{where}; "
            "`kms service status` shows it, `kms service stop` stops it",
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "port": port}).encode(), 0)
    return fd


def lock_holder(db_path: Path, wait_s: float = 1.0) -> tuple[int, int] | None:
    """(pid, port) of the process that holds (or last held) the service lock, as it wrote them; None if it
    wrote nothing readable within ``wait_s`` (it writes them just after it takes the lock)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            data = json.loads(lock_path(db_path).read_text())
            return int(data["pid"]), int(data["port"])
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() >= deadline:
                return None
        time.sleep(0.02)


def write_state(db_path: Path, state: ServiceState) -> None:
    path = state_path(db_path)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(asdict(state), fh)
    os.replace(tmp, path)


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as the OS says (None: no such process, or a zombie). A pid is reused once
    its process ends (a crash, kill -9, a reboot); the pair (pid, start time) names one process for good."""
    if pid <= 0:
        return None
    if Path("/proc/self/stat").exists():  # Linux: state is field 3, start time field 22 (comm may hold spaces)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return None if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]
    try:  # macOS and the BSDs
        out = subprocess.run(
            ["ps", "-o", "stat=,lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=5, check=False
        ).stdout.split(maxsplit=1)
    except (OSError, subprocess.SubprocessError):
        return None
    return None if len(out) < 2 or out[0].startswith("Z") else out[1].strip()


def health(url: str, timeout: float = 0.5) -> dict[str, Any] | None:
    """What the service at ``url`` says on ``/health`` (None: nothing, or not a kms service, answers)."""
    # deferred: urllib.request (http.client, email) only to ask a service; kms hook's launcher imports this module
    import urllib.request

    try:
        with urllib.request.urlopen(url.removesuffix("/mcp") + "/health", timeout=timeout) as reply:  # noqa: S310
            data = json.loads(reply.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("kms") else None


def is_service(state: ServiceState) -> bool:
    """Whether ``state.pid`` is still the process that wrote ``state``: same pid and same start time. A file
    written before start times were kept (an older kms) counts only if its ``/health`` answers with that pid."""
    if state.proc_start is not None:
        return process_start(state.pid) == state.proc_start
    if not pid_alive(state.pid):
        return False
    answer = health(state.url)
    return answer is not None and answer.get("pid") == state.pid


@dataclass(frozen=True)
class StateCheck:
    """What the state file says: the running service, or a stale file (its pid is not the service) now removed."""

    state: ServiceState | None
    stale: ServiceState | None = None


def check_state(db_path: Path) -> StateCheck:
    """The one check every ``kms service`` command (and ``read_state``) goes through before trusting the state
    file or signalling its pid: a file whose process is not the service that wrote it is removed, never acted on."""
    path = state_path(db_path)
    try:
        data = json.loads(path.read_text())
        state = ServiceState(**data)
    except (OSError, ValueError, TypeError):
        return StateCheck(None)
    if is_service(state):
        return StateCheck(state)
    with contextlib.suppress(OSError):
        path.unlink()
    return StateCheck(None, stale=state)


def read_state(db_path: Path) -> ServiceState | None:
    """The instance the state file names, if that very process still runs (a stale file is removed)."""
    return check_state(db_path).state


def running_pages(db_path: Path) -> str | None:
    """The review pages' address of the service running for ``db_path`` (None: none runs). What a session the
    service did not open (stdio) names in a staged call's answer: it asks when it stages, so a service started
    after the session began counts."""
    state = read_state(db_path)
    return state.pages_url if state is not None else None


def session_pages(config: SessionConfig) -> str | None:
    """The review pages' address a session names to its agent (a staged call's answer, ``kms_pending``): the one
    the service that opened it gave it (``SessionConfig.review_url``: loopback, or the public origin for a remote
    grant), else the running service's (``running_pages``); None when no service serves them."""
    return config.review_url or running_pages(config.db_path)


def clear_state(db_path: Path, pid: int) -> None:
    """Remove the state file if it still names ``pid`` (a newer instance's stays)."""
    current = read_state(db_path)
    if current is None or current.pid == pid:
        with contextlib.suppress(OSError):
            state_path(db_path).unlink()


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
