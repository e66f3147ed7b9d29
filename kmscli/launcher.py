"""``kms claude`` (launch Claude Code with a private per-session MCP config)
and ``kms mcp-config``.

The launcher must feel exactly like plain ``claude``: claude inherits the terminal
(stdin/stdout/stderr), its arguments pass through untouched, we print nothing on the
happy path, and we exit with its exit code (re-raising the signal that killed it, so a
shell sees the same thing). Around it we record the session in the DB, write the
composed config to a 0600 file in a 0700 dir, and remove it afterwards.

Signals: the terminal already delivers Ctrl-C, Ctrl-\\, hang-ups and window resizes to
claude (same process group), so forwarding those too would double them (a second
Ctrl-C makes claude quit). We therefore block the signals, read them with
``sigtimedwait`` and forward only those sent by a process (``kill``; ``si_code <= 0``),
never the kernel's/terminal's own.

Plain functions with Typer annotations; ``kmscli/main.py`` registers them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from kmscli.compose import (
    Session,
    compose,
    remove_session_config,
    session_config,
    sweep_session_configs,
    write_session_config,
    write_session_hooks,
)
from kmscli.hook_cmd import SESSION_HOOKS_VAR
from kmscli.hook_files import installed
from kmscli.lease import LeaseKeeper
from kmscli.output import say_error
from kmscli.service_cmds import start_service
from server.activity import tokens
from server.activity.session_registry import end_session, get_session, pid_alive, start_session
from server.config.redact import redact
from server.config.session_contract import SessionConfigError, check_env, new_session_id
from server.config.settings import Settings, load_settings
from server.errors import KmsError
from server.mcp.service_state import ServiceState, read_state
from server.store import db
from server.vault.registry import get_vault, list_vaults

INSTALL_HINT = "npm install -g @anthropic-ai/claude-code"
EXIT_NOT_FOUND = 127
FORWARDED_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGWINCH", "SIGQUIT") if hasattr(signal, name)
)
CLAUDE_CONTEXT_SETTINGS: dict[str, Any] = {"ignore_unknown_options": True, "allow_interspersed_args": False}
"""Register ``claude_command`` with these so ``kms claude -c`` passes ``-c`` to claude."""


def say(message: str, style: str = "yellow") -> None:
    """One line for the person on stderr, prefixed ``kms:`` (the launcher's and ``kms mcp-config``'s)."""

    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[{style}]kms:[/] {escape(message)}", markup=True)


# ----------------------------------------------------------------------------- finding claude


def find_claude(env: Mapping[str, str] | None = None) -> str | None:
    """``$KMS_CLAUDE_BIN`` (a path or a name on PATH), else ``claude`` on PATH or its usual install dirs."""
    env = os.environ if env is None else env
    explicit = env.get("KMS_CLAUDE_BIN")
    path_var = env.get("PATH")
    if explicit:
        if os.sep in explicit or "/" in explicit:
            p = Path(explicit).expanduser().absolute()  # keep "./claude" from turning into a PATH lookup
            return str(p) if p.is_file() and os.access(p, os.X_OK) else None
        return shutil.which(explicit, path=path_var)
    found = shutil.which("claude", path=path_var)
    if found:
        return found
    home = Path(env.get("HOME") or Path.home())
    for candidate in (home / ".claude" / "local" / "claude", home / ".local" / "bin" / "claude"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def missing_claude_message(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("KMS_CLAUDE_BIN"):
        return (
            f"KMS_CLAUDE_BIN={env['KMS_CLAUDE_BIN']} is not an executable. Unset it, or install Claude Code "
            f"with: {INSTALL_HINT}"
        )
    return f"Claude Code (`claude`) was not found on PATH. Install it with: {INSTALL_HINT}"


# ----------------------------------------------------------------------------- running the child


def run_child(cmd: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run ``cmd`` on our terminal and wait; forward process-sent signals; return its returncode.

    A negative returncode (-N) means it was killed by signal N, as in ``subprocess``.
    """
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks; Ctrl-C reaches both
        with _ignoring_sigint():
            return subprocess.call(list(cmd), env=env)
    watch = {*FORWARDED_SIGNALS, signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watch)
    try:
        proc = subprocess.Popen(
            list(cmd), env=env, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        )
        while True:
            rc = proc.poll()
            if rc is not None:
                return rc
            info = signal.sigtimedwait(watch, 0.5)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            if info.si_code <= 0 and info.si_pid != proc.pid:  # sent by kill(), not by the terminal
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(info.si_signo)
    finally:
        while signal.sigtimedwait(watch, 0) is not None:  # drop what arrived after the child ended
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


@contextlib.contextmanager
def _ignoring_sigint():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def exit_code_of(returncode: int) -> int:
    """Shell convention: killed by signal N -> 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _die_like(returncode: int) -> None:
    """Exit the way the child did: re-raise its signal on ourselves, else exit with its code."""
    if returncode < 0:
        sig = -returncode
        sys.stdout.flush()
        sys.stderr.flush()
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
            if hasattr(signal, "pthread_sigmask"):
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
            os.kill(os.getpid(), sig)
    raise typer.Exit(exit_code_of(returncode))


# ----------------------------------------------------------------------------- kms claude


def session_settings(
    conn: Any,
    *,
    vault: str | None,
    write: bool | None,
    env: Mapping[str, str],
    approve: bool = False,
    printing: bool = False,
) -> tuple[Settings, list[Path], str | None, list[str]]:
    """Effective settings for a session, the roots it covers, the vault name, and warnings. ``printing``
    (``claude -p``): nobody sits at the host to answer its dialog, so approvals go to the dashboard."""

    vaults = list_vaults(conn)
    selected = [get_vault(conn, vault)] if vault else vaults
    settings = load_settings(env=env, has_vault=bool(vaults))
    warnings = list(settings.problems)
    if write is not None:
        settings = settings.with_override("agent.write", write)
        if write and not settings.active("agent.write"):
            parent = "kms.enabled" if not settings.get("kms.enabled") else "agent.read"
            warnings.append(f"--write has no effect: {parent} is off (kms config set {parent} true).")
    if approve:  # every write of this session waits for the person (the session contract carries it)
        settings = settings.with_override("write.approval", "always")
        if not settings.active("agent.write"):
            warnings.append("--approve has no effect: agent.write is off (add --write).")
    if printing:
        settings = settings.with_override("write.approval_channel", "dashboard")
    return settings, [v.root for v in selected], selected[0].name if vault else None, warnings


def run_claude(
    claude_args: Sequence[str],
    *,
    vault: str | None = None,
    write: bool | None = None,
    isolated: bool = False,
    print_config: bool = False,
    show_secrets: bool = False,
    env: Mapping[str, str] | None = None,
    approve: bool = False,
    stdio: bool = False,
) -> int:
    """The whole ``kms claude`` flow; returns claude's returncode (negative if killed by a signal)."""

    env = dict(os.environ if env is None else env)
    if show_secrets and not print_config:
        say_error("invalid-input", "--show-secrets only goes with --print-config (a session's config is never printed)")
        return 2
    try:  # claude hands its environment on to the kms server, which would refuse to start
        check_env(env)
    except SessionConfigError as e:
        say_error("invalid-input", str(e))
        return 2
    db_path = db.default_db_path(env)
    conn = db.connect(db_path)
    try:
        try:
            settings, roots, vault_name, warnings = session_settings(
                conn, vault=vault, write=write, env=env, approve=approve, printing=prints(claude_args)
            )
        except KmsError as e:
            say_error(e.kind, e.message)
            return 2
        for w in warnings:
            say(w)
        session = Session(new_session_id(), db_path.resolve(), Path.cwd(), tuple(roots), vault_name)
        on_service = not (stdio or isolated) and settings.get("service.use") and settings.active("agent.read")
        if print_config:  # the config this session would get, the service's entry included: nothing started
            if on_service:
                session = dataclasses.replace(session, service_url=_service_url(db_path, settings))
            doc = compose(settings, session, isolated=isolated)
            print(json.dumps(doc if show_secrets else redact(doc), indent=2))
            return 0
        claude = find_claude(env)
        if claude is None:
            say_error("not-found", missing_claude_message(env))
            return EXIT_NOT_FOUND
        token = None
        if on_service:
            session, token = _on_service(conn, settings, session, env)
        lease = (
            None
            if token is None
            else LeaseKeeper.start(db_path, token.id, tokens.session_lease_s(env), {*FORWARDED_SIGNALS, signal.SIGCHLD})
        )
        doc = compose(settings, session, isolated=isolated)
        _sweep_stale_configs(conn)
        config_path = write_session_config(doc, session.id)
        hooks_path = None if isolated else _session_hooks(settings, session, config_path)
        _one_set_of_hooks(env, session, hooks_path, claude_args)
        returncode: int | None = None
        try:
            start_session(
                conn,
                kind="launcher",
                session_id=session.id,
                argv=["claude", *claude_args],
                vault=vault_name,
                cwd=str(session.cwd),
                project=str(session.cwd),
            )
            conversation = new_conversation_id(claude_args, sys.stdin.isatty() and sys.stdout.isatty())
            own = [f"--session-id={conversation}"] if conversation else []
            cmd = claude_argv(claude, config_path, [*own, *claude_args], hooks_path)
            try:
                returncode = run_child(cmd, env)
            except OSError as e:  # not executable, bad interpreter line, ...
                say_error("not-found", f"could not start {claude}: {e}")
                returncode = 126
            if conversation and returncode == 0:
                say(f"to resume this conversation with kms: kms claude --resume {conversation}", "dim")
            return returncode
        finally:
            remove_session_config(config_path)
            if lease is not None:
                lease.stop()
            if token is not None:
                with contextlib.suppress(Exception):  # it expires by itself should this fail
                    tokens.revoke(conn, token.id)
            try:
                end_session(conn, session.id, None if returncode is None else exit_code_of(returncode))
            except Exception as e:  # never let bookkeeping change claude's exit code
                say(f"could not record the end of session {session.id}: {e}")
    finally:
        conn.close()


def _service_url(db_path: Path, settings: Settings) -> str:
    """Where the session would reach the service: the one running for this database, or where
    ``kms service start`` would start it (service.port on loopback)."""
    running = read_state(db_path)
    if running is not None:
        return running.url
    return ServiceState(0, "127.0.0.1", settings.get("service.port"), "", str(db_path), 0.0).url


def _on_service(
    conn: Any, settings: Settings, session: Session, env: dict[str, str]
) -> tuple[Session, tokens.Token | None]:
    """Serve ``session`` from the kms service (reached, or started and health-checked): a token of its own,
    handed to claude in ``$KMS_SESSION_TOKEN``. If the service cannot be had, the session keeps its own
    ``kms mcp`` over stdio, and stderr says so."""

    try:
        state: Any = start_service(
            session.db_path, settings.get("service.port"), None, settings.get("service.start_wait")
        )
        token, secret = tokens.for_session(conn, session_config(settings, session), lease_s=tokens.session_lease_s(env))
    except (KmsError, OSError) as e:
        say(
            f"the kms service could not be had ({getattr(e, 'message', e)}); this session runs its own "
            "kms mcp over stdio"
        )
        return session, None
    env["KMS_SESSION_TOKEN"] = secret
    return dataclasses.replace(session, service_url=state.url), token


_PRINT = ("-p", "--print")


def prints(claude_args: Sequence[str]) -> bool:
    """Whether claude runs one prompt and prints (``-p``): no person at the host to answer a dialog."""
    return any(a.split("=", 1)[0] in _PRINT for a in claude_args)


_OWN_CONVERSATION = ("-p", "--print", "-r", "--resume", "-c", "--continue", "--session-id", "--fork-session")


def new_conversation_id(claude_args: Sequence[str], interactive: bool) -> str | None:
    """A conversation id to start claude with (``--session-id``), so that its end can say how to resume it.

    Claude Code's own exit hint names the session's config file, which kms removes; so for an interactive
    new conversation kms picks the id and says ``kms claude --resume ID`` instead. None when the person
    prints, resumes, continues or names a session themselves.
    """
    if not interactive or any(a.split("=", 1)[0] in _OWN_CONVERSATION for a in claude_args):
        return None

    return str(uuid.uuid4())


def _session_hooks(settings: Settings, session: Session, config_path: Path | None) -> Path | None:
    """The session's private settings file with kms's hooks (docs/hooks.md), or None; never stops claude."""

    try:
        return write_session_hooks(settings, session, config_path)
    except OSError as e:
        say(f"could not write this session's hooks ({e}); it starts without kms's brief and session note")
        return None


def _one_set_of_hooks(
    env: dict[str, str], session: Session, hooks_path: Path | None, claude_args: Sequence[str]
) -> None:
    """Each hook event of this session runs once: with its own hooks, the session marks claude's environment
    (``$KMS_SESSION_HOOKS``) so kms's installed hooks stand aside (``kmscli.hook_cmd``); without, an inherited
    mark is dropped and the installed ones run. Said on stderr only where kms's hooks are installed."""

    if hooks_path is None:
        env.pop(SESSION_HOOKS_VAR, None)
    else:
        env[SESSION_HOOKS_VAR] = session.id
    found = installed(session.cwd, env, claude_args)
    if not found:
        return
    where = ", ".join(str(p) for p in found)
    if hooks_path is not None:
        say(f"this session runs its own hooks; kms's hooks in {where} stand aside (docs/hooks.md)", "dim")
    else:
        say(f"this session runs kms's hooks in {where}, not its own (docs/hooks.md)", "dim")


def claude_argv(
    claude: str, config_path: Path | None, claude_args: Sequence[str], settings_path: Path | None = None
) -> list[str]:
    """claude's argv: ``--mcp-config=FILE`` (and ``--settings=FILE``, the session's hooks) as one word each,
    then the person's arguments untouched.

    Claude Code's ``--mcp-config`` takes several values, so ``--mcp-config FILE "a prompt"`` would read
    the prompt as a second config file; the ``=`` form ends the option at its one value. A resumed
    session (``--resume ID``, ``--continue``) gets this session's fresh config the same way, since the
    file of the session it resumes was removed when that one ended.
    """
    own = [f"--mcp-config={config_path}"] if config_path else []
    if settings_path is not None:
        own.append(f"--settings={settings_path}")
    return [claude, *own, *claude_args]


def _sweep_stale_configs(conn: Any) -> None:
    """Delete configs of sessions that ended or whose launcher is gone (best effort)."""

    def stale(session_id: str, mtime: float) -> bool:
        row = get_session(conn, session_id)
        if row is None:  # not recorded (yet): only if clearly abandoned
            return time.time() - mtime > 3600
        return row.ended_at is not None or (row.pid != os.getpid() and not pid_alive(row.pid))

    try:
        sweep_session_configs(stale)
    except Exception as e:  # cleanup must never stop claude from starting
        say(f"could not sweep old session configs: {e}")


def claude_command(
    claude_args: Annotated[
        list[str] | None,
        typer.Argument(help="Arguments for claude, passed through untouched (put them after --).", show_default=False),
    ] = None,
    vault: Annotated[str | None, typer.Option("--vault", help="Scope the session to one vault (name or id).")] = None,
    write: Annotated[
        bool | None,
        typer.Option(
            "--write/--no-write", help="Allow or forbid note writes for this session (overrides agent.write)."
        ),
    ] = None,
    approve: Annotated[
        bool,
        typer.Option(
            "--approve",
            help="Every write of this session waits for your approval (the dashboard's "
            "pending pane, `kms approve`): write.approval = always for this session.",
        ),
    ] = False,
    isolated: Annotated[
        bool, typer.Option("--isolated", help="Leave the kms server out; only other enabled servers.")
    ] = False,
    print_config: Annotated[
        bool,
        typer.Option("--print-config", help="Print the session's MCP config (secrets redacted) and exit."),
    ] = False,
    show_secrets: Annotated[
        bool, typer.Option("--show-secrets", help="With --print-config: print secrets in clear.")
    ] = False,
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Run this session's own `kms mcp` over stdio, not the kms service.")
    ] = False,
) -> None:
    """Start Claude Code with kms (and your other enabled MCP servers) for this session."""
    returncode = run_claude(
        claude_args or [],
        vault=vault,
        write=write,
        isolated=isolated,
        print_config=print_config,
        show_secrets=show_secrets,
        approve=approve,
        stdio=stdio,
    )
    _die_like(returncode)
