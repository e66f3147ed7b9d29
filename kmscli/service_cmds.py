"""``kms serve``, ``kms service start|stop|status|restart|logs`` and ``kms token create|list|revoke``.

Thin adapters: the service is ``server.mcp.service`` (run, state file), tokens are
``server.activity.tokens`` and their scopes ``server.config.scopes``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from kmscli.compose import ISOLATION_FLAGS
from kmscli.hosts import get_host
from kmscli.output import JsonOpt, cli_errors, console, err_console, open_db, print_json
from server import installed_version
from server.activity import remote_grants, tokens
from server.activity.session_registry import pid_alive
from server.config.allowlist import Allowlist
from server.config.scopes import ScopeError, Scopes
from server.config.settings import load_settings
from server.errors import KmsError
from server.humanize import ago
from server.mcp import service
from server.mcp.http_guard import LOOPBACK
from server.store.db import default_db_path
from server.writes.undo.trash import parse_duration

service_app = typer.Typer(
    help="The kms service: one process serving every agent session over HTTP on loopback.", no_args_is_help=True
)
token_app = typer.Typer(
    help="Bearer tokens for the kms service and remote grants: create (shown once), list, revoke.",
    no_args_is_help=True,
)

PortOpt = Annotated[
    int | None, typer.Option("--port", help="TCP port on loopback (default: the service.port setting, 8765).")
]
HostOpt = Annotated[str | None, typer.Option("--host", help="Bind only this address (default: 127.0.0.1 and ::1).")]
RemoteOpt = Annotated[bool, typer.Option("--allow-remote", help="Allow a non-loopback --host (see the warning).")]
# How long `kms service start` waits for the service's health check: the person asked for the service and
# waits for it (a cold start imports the MCP SDK, uvicorn and starlette, slower on a loaded machine).
# `kms claude` waits only ``service.start_wait`` and keeps its own stdio server rather than hold the person up.
START_WAIT_S = 15.0


def _check_host(host: str | None, allow_remote: bool) -> None:

    if host is None or host in LOOPBACK:
        return
    if not allow_remote:
        raise KmsError(
            "invalid-input",
            f"--host {host} is not a loopback address: anyone who can reach it and holds "
            "a token could read (and, with its scopes, change) your notes. Add --allow-remote to accept "
            "that, preferably behind TLS and a firewall",
        )
    console.print(
        f"[yellow]warning:[/] serving on {host}: every machine that can reach it may try tokens; "
        "traffic is plain HTTP (no TLS)",
        highlight=False,
    )


def _port(port: int | None) -> int:
    """The port asked for, else the ``service.port`` setting (what ``kms claude`` and the hosts use)."""

    return port if port is not None else int(load_settings().get("service.port"))


def serve_cmd(port: PortOpt = None, host: HostOpt = None, allow_remote: RemoteOpt = False) -> None:
    """Run the kms service in the foreground (for systemd, launchd or a terminal); Ctrl-C stops it."""

    with cli_errors():
        _check_host(host, allow_remote)
        port = _port(port)
        db_path = default_db_path()
        running = service.read_state(db_path)
        if running is not None and running.pid != os.getpid():
            raise KmsError(
                "already-exists",
                f"a kms service already serves this database (pid {running.pid}, "
                f"{running.url}); stop it with `kms service stop`",
            )

        def ready(state: service.ServiceState) -> None:
            console.print(f"kms service on {state.url} (pid {state.pid}); Ctrl-C stops it", highlight=False)

        try:
            code = service.run(db_path, port=port, host=host, on_ready=ready)
        except OSError as e:
            raise listen_error(port, e) from None
    raise typer.Exit(code)


def listen_error(port: int, e: OSError) -> KmsError:
    """Why the service cannot listen: a taken port is named as such, with the way to pick another."""
    if e.errno == errno.EADDRINUSE:
        return KmsError(
            "conflict", f"port {port} is in use; choose another with --port or `kms config set service.port`"
        )
    return KmsError("conflict", f"cannot listen on port {port}: {e.strerror or e}")


def _health(url: str, timeout: float = 0.5) -> bool:

    return service.health(url, timeout) is not None


def current_state(db_path: Path) -> Any:
    """The running service (``server.mcp.service.check_state``); a stale state file is said to be one."""

    check = service.check_state(db_path)
    if check.stale is not None:
        err_console.print(
            f"[yellow]note:[/] removed a stale state file: pid {check.stale.pid} is not the kms service "
            "(it ended without cleaning up); nothing was signalled",
            highlight=False,
            soft_wrap=True,
        )
    return check.state


_ERROR_LINE = re.compile(r"^error \((?P<kind>[a-z-]+)\): (?P<message>.+)$")


def _child_error(log_file: Path, offset: int, code: int) -> KmsError:
    """The error a background service that exited at once wrote to its log (the last ``error (kind): ...``
    line since ``offset``), typed again for the person who ran ``kms service start``."""
    try:
        with open(log_file, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        text = ""
    for line in reversed(text.splitlines()):
        found = _ERROR_LINE.match(line.strip())
        if found:
            return KmsError(found["kind"], found["message"])
    return KmsError("conflict", f"the kms service exited at once (code {code}); see `kms service logs`")


def start_service(
    db_path: Path,
    port: int,
    host: str | None,
    wait_s: float = START_WAIT_S,
    *,
    allow_remote: bool = False,
    exact: bool = False,
) -> Any:
    """The running service for ``db_path``, started in the background if needed (health-checked). ``exact``:
    the person asked for this port/host, so a service already running elsewhere is an error, not an answer.
    A child that exits before it answers (a taken port, a refused host) is reported at once, typed."""
    return _start_service(db_path, port, host, wait_s, allow_remote=allow_remote, exact=exact)[0]


STARTS = {  # how ``kms service start`` found the service it answers with
    "started": "kms service on",
    "running": "a kms service already runs on",
    "raced": "a kms service was starting already: it runs on",  # another start took the service lock first
}


def _start_service(
    db_path: Path, port: int, host: str | None, wait_s: float, *, allow_remote: bool, exact: bool
) -> tuple[Any, str]:
    """``start_service``, and how it found the service it answers with (a key of ``STARTS``)."""
    running = current_state(db_path)
    how = "running"
    if running is None:
        running, started = _spawn(db_path, port, host, wait_s, allow_remote=allow_remote)
        how = "started" if started else "raced"
    if how != "started":
        _check_running(running, port, host, allow_remote=allow_remote, exact=exact)
    return running, how


def _check_running(running: Any, port: int, host: str | None, *, allow_remote: bool, exact: bool) -> None:
    """A service that runs already is the answer, if it is this kms's version and where the person asked."""

    if running.version != (installed_version() or "0"):
        raise KmsError(
            "conflict",
            f"the running kms service is version {running.version}, this kms is "
            f"{installed_version()}: `kms service restart` replaces it",
        )
    if exact and (running.port != port or (host is not None and host != running.host)):
        moved = f"--port {port}" + (f" --host {host}" if host else "") + (" --allow-remote" if allow_remote else "")
        raise KmsError(
            "already-exists",
            f"a kms service already runs at {running.url} (pid {running.pid}); `kms service restart {moved}` moves it",
        )


def _spawn(
    db_path: Path, port: int, host: str | None, wait_s: float, *, allow_remote: bool, again: bool = True
) -> tuple[Any, bool]:
    """Start ``kms serve`` in the background and wait until a service answers: (its state, whether it is the
    one started here). Another start may win the race for the service lock (``service.hold_lock``): the child
    here is then refused at once, and the service that one starts is the answer once it answers. Should the
    holder end without answering (a service that was stopping, one that failed), this starts one ``again``."""

    log_file = service.log_path(db_path)
    log = open(log_file, "ab")  # noqa: SIM115 - handed to the child
    os.chmod(log_file, 0o600)
    offset = log.tell()
    args = [
        sys.executable,
        *ISOLATION_FLAGS,
        "-m",
        "kmscli",
        "serve",
        "--port",
        str(port),
        *(["--host", host] if host else []),
        *(["--allow-remote"] if allow_remote else []),
    ]
    env = {**os.environ, "KMS_DB_PATH": str(db_path)}
    child = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True)
    log.close()
    deadline = time.monotonic() + wait_s
    lost: KmsError | None = None  # the child's refusal, when another start holds the service lock
    while time.monotonic() < deadline:
        state = service.read_state(db_path)
        if state is not None and _health(state.url):
            return state, state.pid == child.pid
        code = child.poll()
        if code is not None and lost is None:
            error = _child_error(log_file, offset, code)
            if error.kind != "already-exists":
                raise error
            lost = error
        if lost is not None and not _lock_held_by_a_live_process(db_path):
            if not again:
                raise lost
            left = deadline - time.monotonic()
            return _spawn(db_path, port, host, left, allow_remote=allow_remote, again=False)
        time.sleep(0.05)
    raise KmsError("conflict", f"the kms service did not answer within {wait_s:g} s; see `kms service logs`")


def _lock_held_by_a_live_process(db_path: Path) -> bool:

    holder = service.lock_holder(db_path)
    return holder is not None and pid_alive(holder[0])


@service_app.command("start")
def start_cmd(port: PortOpt = None, host: HostOpt = None, allow_remote: RemoteOpt = False) -> None:
    """Start the service in the background (one per database) and wait until it answers."""
    with cli_errors():
        _check_host(host, allow_remote)
        state, how = _start_service(
            default_db_path(),
            _port(port),
            host,
            START_WAIT_S,
            allow_remote=allow_remote,
            exact=port is not None or host is not None,
        )
        console.print(f"{STARTS[how]} {state.url} (pid {state.pid})", highlight=False, soft_wrap=True)


STOP_WAIT_S = 10.0


@service_app.command("stop")
def stop_cmd() -> None:
    """Stop the background service (sessions end; journals, staged calls and limits stay in the database)."""

    with cli_errors():
        state = current_state(default_db_path())
        if state is None:
            console.print("no kms service is running for this database")
            return
        os.kill(state.pid, signal.SIGTERM)  # only the process check_state proved to be the service
        deadline = time.monotonic() + STOP_WAIT_S
        while service.is_service(state):
            if time.monotonic() >= deadline:
                raise KmsError(
                    "conflict",
                    f"the kms service (pid {state.pid}) did not stop within {STOP_WAIT_S:g} s; "
                    f"`kill -9 {state.pid}` ends it",
                )
            time.sleep(0.05)
        console.print(f"stopped the kms service (pid {state.pid})", highlight=False)


@service_app.command("restart")
def restart_cmd(port: PortOpt = None, host: HostOpt = None, allow_remote: RemoteOpt = False) -> None:
    """Stop the service if it runs, then start it (as this kms version)."""
    stop_cmd()
    start_cmd(port, host, allow_remote)


@service_app.command("status")
def status_cmd(json_out: JsonOpt = False) -> None:
    """Whether the service runs, where, as which version, since when (no secret is shown)."""

    with cli_errors():
        state = current_state(default_db_path())
        info = (
            None
            if state is None
            else {
                "pid": state.pid,
                "url": state.url,
                "version": state.version,
                "startedAt": state.started_at,
                "answers": _health(state.url),
            }
        )
        if json_out:
            print_json({"running": state is not None, **(info or {})})
            return
        if state is None or info is None:
            console.print("no kms service is running for this database (`kms service start`)")
            return
        console.print(
            f"kms service {state.version} on {state.url}, pid {state.pid}, started "
            f"{ago(state.started_at, time.time(), '?')}" + ("" if info["answers"] else " [red](not answering)[/]"),
            highlight=False,
        )


@service_app.command("logs")
def logs_cmd(lines: Annotated[int, typer.Option("-n", help="How many of the last lines.")] = 50) -> None:
    """The last lines of the background service's log."""

    path = service.log_path(default_db_path())
    text = path.read_text(errors="replace") if path.exists() else ""
    for line in text.splitlines()[-lines:]:
        console.print(line, markup=False, highlight=False)


@token_app.command("create")
def token_create_cmd(
    label: Annotated[str, typer.Option("--label", help="Who the token is for (shown in lists).")],
    scopes: Annotated[
        str,
        typer.Option(
            "--scopes",
            help="e.g. 'tier:write vault:notes vault:work folder:drafts approval' (vault: and folder: repeat).",
        ),
    ] = "tier:read",
    expires: Annotated[str | None, typer.Option("--expires", help="Lifetime: 30d, 12h, 2w.")] = None,
) -> None:
    """Create a token; it is printed once (only its hash is kept)."""

    with cli_errors():
        try:
            parsed = Scopes.parse(scopes)
        except ScopeError as e:
            raise KmsError("invalid-input", str(e)) from None
        conn = open_db(create=True)
        tokens.check_vaults(conn, parsed)
        tokens.check_reach(parsed, Allowlist(load_settings().get("write.allowlist")))
        token, secret = tokens.create(
            conn,
            label=label,
            scopes=parsed,
            kind="admin" if parsed.admin else "host",
            expires_in_s=parse_duration(expires) if expires else None,
        )
        console.print(f"token {token.id} ({token.scopes.text()}); shown once, keep it:", highlight=False)
        sys.stdout.write(secret + "\n")


@token_app.command("list")
def token_list_cmd(
    all_tokens: Annotated[bool, typer.Option("--all", help="Revoked and expired too.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Tokens with their label, scopes and last use (never a secret)."""

    with cli_errors():
        now = time.time()
        found = tokens.list_tokens(open_db(), include_ended=all_tokens, now=now)
        if json_out:
            print_json([t.to_json(now) for t in found])
            return
        for t in found:
            used = ago(t.last_used_at, now, "never") if t.last_used_at else "never used"
            writes = "" if t.writes == "active" else f", writes {t.writes} (session {t.session_id})"
            if t.writes == "revoked" and t.kind == "host" and t.state(now) == "active":
                writes += f": replace it with {t.renewal()}"
            console.print(
                f"{t.id}  {t.label}  [{t.kind}] {t.scopes.text()}  {t.state(now)}{writes}, {used}",
                markup=False,
                highlight=False,
            )


@token_app.command("secret")
def token_secret_cmd(host: Annotated[str, typer.Argument(help="The host (kms mcp-config HOST --http).")]) -> None:
    """Print the secret of a host's token (for the variable its entry reads)."""

    with cli_errors():
        name = known_host(host)
        sys.stdout.write(tokens.host_secret(open_db(), default_db_path(), name) + "\n")


def known_host(name: str) -> str:
    """A host ``kms mcp-config`` knows, by its own name: an unknown one was told to run
    ``kms mcp-config NAME --http``, a command that fails in turn."""

    return get_host(name).name


@token_app.command("header")
def token_header_cmd(host: Annotated[str, typer.Argument(help="The host (kms mcp-config HOST --http).")]) -> None:
    """Print a host's Authorization header as JSON (Claude Code's headersHelper runs this)."""

    with cli_errors():
        name = known_host(host)
        secret = tokens.host_secret(open_db(), default_db_path(), name)
        sys.stdout.write(json.dumps({"Authorization": f"Bearer {secret}"}) + "\n")


@token_app.command("revoke")
def token_revoke_cmd(token: Annotated[str, typer.Argument(help="The token's id or label.")]) -> None:
    """Revoke a token or a remote grant (its id, or its token's): its next request is refused (401)."""

    with cli_errors():
        conn = open_db()
        try:  # a remote grant ends with every token it was given
            grant = remote_grants.revoke_grant(conn, token)
            console.print(f"revoked {grant['id']} ({grant['client']} via remote)", markup=False, highlight=False)
            return
        except KmsError as e:
            if e.kind != "not-found":
                raise
        done = tokens.revoke(conn, token)
        console.print(f"revoked {done.id} ({done.label})", markup=False, highlight=False)
