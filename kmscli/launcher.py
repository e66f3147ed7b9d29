"""``kms claude`` (launch Claude Code with a private per-session MCP config), ``kms doctor``
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
import enum
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from kmscli.compose import (
    HOSTS,
    Session,
    compose,
    mcp_config_snippet,
    redact,
    remove_session_config,
    sweep_session_configs,
    write_session_config,
)
from server.config.session import SessionConfigError, check_env
from server.config.settings import Settings, load_settings
from server.humanize import NEVER, ago
from server.store import db

INSTALL_HINT = "npm install -g @anthropic-ai/claude-code"
EXIT_NOT_FOUND = 127
FORWARDED_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGWINCH", "SIGQUIT")
    if hasattr(signal, name)
)
CLAUDE_CONTEXT_SETTINGS: dict[str, Any] = {"ignore_unknown_options": True, "allow_interspersed_args": False}
"""Register ``claude_command`` with these so ``kms claude -c`` passes ``-c`` to claude."""


def _err(message: str, style: str = "yellow") -> None:
    from rich.console import Console

    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[{style}]kms:[/] {message}", markup=True)


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
    conn: Any, *, vault: str | None, write: bool | None, env: Mapping[str, str]
) -> tuple[Settings, list[Path], str | None, list[str]]:
    """Effective settings for a session, the roots it covers, the vault name, and warnings."""
    from server.vault.registry import get_vault, list_vaults

    vaults = list_vaults(conn)
    selected = [get_vault(conn, vault)] if vault else vaults
    settings = load_settings(env=env, has_vault=bool(vaults))
    warnings = list(settings.problems)
    if write is not None:
        settings = settings.with_override("agent.write", write)
        if write and not settings.active("agent.write"):
            parent = "kms.enabled" if not settings.get("kms.enabled") else "agent.read"
            warnings.append(f"--write has no effect: {parent} is off (kms config set {parent} true).")
    return settings, [v.root for v in selected], selected[0].name if vault else None, warnings


def run_claude(
    claude_args: Sequence[str],
    *,
    vault: str | None = None,
    write: bool | None = None,
    isolated: bool = False,
    print_config: bool = False,
    env: Mapping[str, str] | None = None,
) -> int:
    """The whole ``kms claude`` flow; returns claude's returncode (negative if killed by a signal)."""
    from server.activity.sessions import end_session, start_session
    from server.config.session import new_session_id
    from server.errors import KmsError

    env = dict(os.environ if env is None else env)
    try:  # claude hands its environment on to the kms server, which would refuse to start
        check_env(env)
    except SessionConfigError as e:
        _err(str(e), "red")
        return 2
    db_path = db.default_db_path(env)
    conn = db.connect(db_path)
    try:
        try:
            settings, roots, vault_name, warnings = session_settings(conn, vault=vault, write=write, env=env)
        except KmsError as e:
            _err(e.message, "red")
            return 2
        for w in warnings:
            _err(w)
        session = Session(new_session_id(), db_path.resolve(), Path.cwd(), tuple(roots), vault_name)
        doc = compose(settings, session, isolated=isolated)
        if print_config:
            print(json.dumps(redact(doc), indent=2))
            return 0
        claude = find_claude(env)
        if claude is None:
            _err(missing_claude_message(env), "red")
            return EXIT_NOT_FOUND
        _sweep_stale_configs(conn)
        config_path = write_session_config(doc, session.id)
        returncode: int | None = None
        try:
            start_session(
                conn,
                kind="launcher",
                session_id=session.id,
                argv=["claude", *claude_args],
                vault=vault_name,
                cwd=str(session.cwd),
            )
            cmd = [claude, *(["--mcp-config", str(config_path)] if config_path else []), *claude_args]
            try:
                returncode = run_child(cmd, env)
            except OSError as e:  # not executable, bad interpreter line, ...
                _err(f"could not start {claude}: {e}", "red")
                returncode = 126
            return returncode
        finally:
            remove_session_config(config_path)
            try:
                end_session(conn, session.id, None if returncode is None else exit_code_of(returncode))
            except Exception as e:  # never let bookkeeping change claude's exit code
                _err(f"could not record the end of session {session.id}: {e}")
    finally:
        conn.close()


def _sweep_stale_configs(conn: Any) -> None:
    """Delete configs of sessions that ended or whose launcher is gone (best effort)."""
    import time

    from server.activity.sessions import get_session, pid_alive

    def stale(session_id: str, mtime: float) -> bool:
        row = get_session(conn, session_id)
        if row is None:  # not recorded (yet): only if clearly abandoned
            return time.time() - mtime > 3600
        return row.ended_at is not None or (row.pid != os.getpid() and not pid_alive(row.pid))

    try:
        sweep_session_configs(stale)
    except Exception as e:  # cleanup must never stop claude from starting
        _err(f"could not sweep old session configs: {e}")


def claude_command(
    claude_args: Annotated[
        list[str] | None,
        typer.Argument(
            help="Arguments for claude, passed through untouched (put them after --).", show_default=False
        ),
    ] = None,
    vault: Annotated[
        str | None, typer.Option("--vault", help="Scope the session to one vault (name or id).")
    ] = None,
    write: Annotated[
        bool | None,
        typer.Option(
            "--write/--no-write", help="Allow or forbid note writes for this session (overrides agent.write)."
        ),
    ] = None,
    isolated: Annotated[
        bool, typer.Option("--isolated", help="Leave the kms server out; only other enabled servers.")
    ] = False,
    print_config: Annotated[
        bool,
        typer.Option("--print-config", help="Print the session's MCP config (secrets redacted) and exit."),
    ] = False,
) -> None:
    """Start Claude Code with kms (and your other enabled MCP servers) for this session."""
    returncode = run_claude(
        claude_args or [], vault=vault, write=write, isolated=isolated, print_config=print_config
    )
    _die_like(returncode)


# ----------------------------------------------------------------------------- kms doctor


def _claude_report(env: Mapping[str, str]) -> dict[str, Any]:
    claude = find_claude(env)
    if claude is None:
        return {"ok": False, "path": None, "version": None, "message": missing_claude_message(env)}
    try:
        out = subprocess.run(
            [claude, "--version"], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL
        )
        version = (
            (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""
        )
        ok = out.returncode == 0
        message = "" if ok else f"`claude --version` exited with {out.returncode}"
    except (OSError, subprocess.TimeoutExpired) as e:
        version, ok, message = None, False, f"`claude --version` failed: {e}"
    return {"ok": ok, "path": claude, "version": version, "message": message}


def _index_report(conn: Any) -> list[dict[str, Any]]:
    from server.index.overview import overview

    return [
        {"name": v.name, "root": v.root, "root_exists": v.root_exists, "last_indexed_at": v.last_indexed_at,
         "notes": v.notes, "hidden": v.hidden, "frontmatter_errors": v.flagged}
        for v in overview(conn, flagged=True).vaults
    ]


def _model_report(settings: Settings) -> dict[str, Any]:
    """``server.index.embed.model_status`` (files present, where from); guarded so doctor works without it."""
    if not settings.get("embed.enabled"):
        return {"ok": None, "state": "off (embed.enabled = false): search is keyword-only"}
    try:
        from server.index.embed import model_status
    except ImportError:
        return {"ok": None, "state": "embedding support not installed in this build"}
    try:
        status = model_status(settings.get("embed.model_dir"))
    except Exception as e:  # a broken model must not break doctor
        return {"ok": False, "error": True, "state": f"error: {e}"}
    if status.get("ready"):
        state = f"{status.get('model')} ready in {status.get('dir')} ({status.get('source')})"
    else:
        state = status.get("reason") or "not ready"
    return {"ok": bool(status.get("ready")), "state": state, **{k: _jsonable(v) for k, v in status.items()}}


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None) | list | dict) else str(value)


def doctor_report(env: Mapping[str, str] | None = None, *, show_secrets: bool = False) -> dict[str, Any]:
    """Everything ``kms doctor`` checks, as data (the command renders it)."""
    from server.activity.sessions import list_sessions, pid_alive

    env = dict(os.environ if env is None else env)
    db_path = db.default_db_path(env)
    report: dict[str, Any] = {"python": sys.executable, "claude": _claude_report(env)}
    vaults: list[dict[str, Any]] = []
    active: list[dict[str, Any]] = []
    from server.errors import KmsError
    from server.store.health import check_database

    damage = check_database(db_path)  # also damage that opening alone does not reveal
    db_error = damage.message if damage is not None else None
    try:
        conn = db.connect(db_path)
        try:
            vaults = _index_report(conn)
            active = [
                {**s.to_json(), "process_alive": pid_alive(s.pid)} for s in list_sessions(conn, active=True)
            ]
        finally:
            conn.close()
    except Exception as e:
        db_error = db_error or (e.message if isinstance(e, KmsError) else str(e))
    report["database"] = {"path": str(db_path), "ok": db_error is None, "error": db_error, "vaults": vaults}
    report["active_sessions"] = active
    settings = load_settings(env=env, has_vault=bool(vaults))
    report["settings"] = {
        "path": str(settings.path),
        "exists": settings.path.exists(),
        "problems": settings.problems,
        "values": {e.key: e.value for e in settings.all_entries()},
    }
    if not show_secrets:
        report["settings"]["values"] = redact(report["settings"]["values"])
    report["model"] = _model_report(settings)
    session = Session("preview", db_path.resolve(), Path.cwd(), tuple(Path(v["root"]) for v in vaults))
    servers = compose(settings, session)
    report["session_servers"] = (servers if show_secrets else redact(servers))["mcpServers"]
    report["ok"] = bool(report["claude"]["ok"] and db_error is None and not settings.problems)
    return report


def doctor_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    show_secrets: Annotated[bool, typer.Option("--show-secrets", help="Print secrets in clear.")] = False,
) -> None:
    """Check claude, the index, the embedding model, settings, and what a session would get."""
    report, now = doctor_report(show_secrets=show_secrets), time.time()
    if json_output:
        print(json.dumps(report, indent=2, default=str))
        raise typer.Exit(0 if report["ok"] else 1)
    from rich.console import Console

    out = Console(highlight=False)
    ok, bad, meh = "[green]✓[/]", "[red]✗[/]", "[yellow]![/]"
    c = report["claude"]
    if c["ok"]:
        out.print(f"{ok} claude: {c['path']} ({c['version']})")
    else:
        out.print(f"{bad} claude: {c['message'] or c['path']}")
    d = report["database"]
    out.print(f"{ok if d['ok'] else bad} database: {d['path']}" + (f" — {d['error']}" if d["error"] else ""))
    if d["ok"] and not d["vaults"]:
        out.print(f"{meh} no vault registered: kms vault add PATH")
    for v in d["vaults"]:
        mark = ok if v["root_exists"] and v["last_indexed_at"] else meh
        extra = "" if v["root_exists"] else " [red](folder missing)[/]"
        out.print(
            f"{mark} vault {v['name']}: {v['root']}{extra} — {v['notes']} notes, {v['hidden']} hidden, "
            f"{v['frontmatter_errors']} frontmatter errors, indexed {ago(v['last_indexed_at'], now, NEVER)}"
        )
    m = report["model"]
    mark = ok if m.get("ok") else bad if m.get("error") else meh  # a missing model only costs semantic search
    state = m.get("state") or ", ".join(f"{k}={v}" for k, v in m.items() if k != "ok")
    out.print(f"{mark} embedding model: {state}")
    s = report["settings"]
    out.print(
        f"{ok if not s['problems'] else bad} settings: {s['path']}" + ("" if s["exists"] else " (defaults)")
    )
    for p in s["problems"]:
        out.print(f"    {bad} {p}")
    servers = report["session_servers"]
    if servers:
        out.print(f"{ok} `kms claude` sessions get: {', '.join(servers)}")
        for name, entry in servers.items():
            line = entry.get("url") or " ".join([entry.get("command", ""), *entry.get("args", [])])
            out.print(f"    {name}: {line}")
    else:
        out.print(
            f"{meh} `kms claude` sessions get no MCP servers (kms.enabled or agent.read is off and nothing else is on)"
        )
    for a in report["active_sessions"]:
        state = "running" if a["process_alive"] else "[yellow]stale (process gone)[/]"
        out.print(
            f"  session {a['id']} ({a['kind']}, pid {a['pid']}) {state}, started {ago(a['started_at'], now, NEVER)}"
        )
    raise typer.Exit(0 if report["ok"] else 1)


# ----------------------------------------------------------------------------- kms mcp-config


class Host(enum.StrEnum):
    claude_code = "claude-code"
    claude_desktop = "claude-desktop"
    cursor = "cursor"
    vscode = "vscode"


assert tuple(h.value for h in Host) == HOSTS


def mcp_config_command(
    host: Annotated[Host, typer.Argument(help="Which MCP host to configure.")] = Host.claude_code,
) -> None:
    """Print the config snippet that gives another MCP host (Cursor, VS Code, ...) the kms server."""
    db_path = db.default_db_path().resolve()
    print(mcp_config_snippet(host.value, load_settings(), db_path), end="")
