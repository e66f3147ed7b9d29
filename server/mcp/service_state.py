"""The state file of the kms service: which instance runs for a database, where, since when (issue 37).

``<database folder>/service/state.json`` (0600 in a 0700 folder) names the running instance: pid, the
process's start time, host, port, version, database. ``kms service``, the launcher, the dashboard and a session
that names the review pages read it, and trust it only for the process it names (``check_state``); it holds no
secret. The serving process holds an exclusive ``flock`` on ``service.lock`` beside it from before it binds until
it exits (``hold_lock``): one service per database. Kept apart from ``server.mcp.service`` (which runs the
service and imports the HTTP app, the hub and the tools) so that what only reads the state imports none of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.activity import review_access
from server.activity.session_registry import pid_alive
from server.errors import KmsError
from server.store.db import service_folder

if TYPE_CHECKING:
    from server.config.session_contract import SessionConfig


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
