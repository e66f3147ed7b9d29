"""``kms mcp-config HOST [--http] [--install|--uninstall]``: give another agent host the kms server (stdio) or
the kms service (HTTP, a token of its own). Thin: the hosts' shapes are ``kmscli.hosts``, tokens
``server.activity.tokens``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kmscli import hosts
from kmscli.compose import ISOLATION_FLAGS, standalone_kms_entry
from kmscli.hosts import HOSTS
from kmscli.launcher import say
from kmscli.output import report_error, say_error
from server.activity import tokens
from server.activity.tokens import HOST_TOKEN_VARS
from server.config.scopes import ScopeError, Scopes
from server.config.settings import load_settings
from server.errors import KmsError
from server.mcp import service
from server.store import db


def _uninstall(host: Any, path: Path | None) -> None:
    """``kms mcp-config HOST --uninstall`` (with or without ``--http``): the host's entry goes, and so do its
    token (revoked) and the token's secret on disk. Both, whichever way it was installed: a host once given
    ``--http`` and then uninstalled without it would otherwise keep a working token nobody uses."""

    target, backup, found = hosts.uninstall(host, path)
    db_path = db.default_db_path().resolve()
    revoked = 0
    if db_path.exists():  # no database: no token to revoke (and none is made just to say so)
        conn = db.connect(db_path)
        try:
            revoked = tokens.forget_host(conn, db_path, host.name)
        finally:
            conn.close()
    removed = f"removed kms from {target}" + (f" (backup: {backup})" if backup else "") if found else ""
    gone = f"{revoked} token(s) of {host.name} revoked, its secret deleted" if revoked else ""
    said = "; ".join(p for p in (removed, gone) if p)
    say(said or f"kms was not in {target}; nothing changed", "green" if said else "yellow")


def _http_config(host: Any, *, install: bool, uninstall: bool, path: Path | None, scopes: str) -> None:
    """``kms mcp-config HOST --http``: the host's entry for the kms service and a token of its own (a new one
    each time: the old is revoked); ``--uninstall`` also revokes it."""

    if uninstall:
        _uninstall(host, path)
        return
    db_path = db.default_db_path().resolve()
    conn = db.connect(db_path)
    try:
        try:
            parsed = Scopes.parse(scopes)
        except ScopeError as e:
            raise KmsError("invalid-input", str(e)) from None
        state = service.read_state(db_path)
        port = state.port if state is not None else load_settings().get("service.port")
        url = state.url if state is not None else f"http://127.0.0.1:{port}/mcp"
        helper = shlex.join(
            [
                "env",
                f"KMS_DB_PATH={db_path}",
                sys.executable,
                *ISOLATION_FLAGS,
                "-m",
                "kmscli",
                "token",
                "header",
                host.name,
            ]
        )
        entry = hosts.http_entry(host, url, helper)
        token = tokens.for_host(conn, db_path, host.name, parsed)
    finally:
        conn.close()
    var = HOST_TOKEN_VARS.get(host.name)
    if host.name == "vscode":
        where = "VS Code asks for the token once and keeps it in its secret storage: paste `kms token secret vscode`"
    elif var:
        where = f'export {var}="$(kms token secret {host.name})" in the shell (profile) {host.label} starts from'
    else:
        where = "Claude Code asks kms for the header at each connection (headersHelper)"
    if install:
        target, backup = hosts.install(host, entry, path)
        say(
            f"kms (service, token {token.id}: {token.scopes.text()}) installed for {host.label} in {target}"
            + (f" (backup: {backup})" if backup else "")
            + f"; {where}",
            "green",
        )
    else:
        sys.stdout.write(hosts.document(host, entry))
        sys.stdout.flush()
        say(f"{host.label}: merge this into {host.config_path()} (or --install); token {token.id}; {where}", "dim")
    if state is None:
        say("the kms service is not running: kms service start", "yellow")


def _complete_host(incomplete: str) -> list[str]:

    return [h for h in HOSTS if h.startswith(incomplete)]


def mcp_config_command(
    host_arg: Annotated[
        str | None,
        typer.Argument(
            metavar="HOST",
            help="claude-code, claude-desktop, cursor, vscode, windsurf, zed, codex or gemini.",
            autocompletion=_complete_host,
            show_default=False,
        ),
    ] = None,
    host_opt: Annotated[
        str | None,
        typer.Option("--host", metavar="HOST", help="The same as the HOST argument.", autocompletion=_complete_host),
    ] = None,
    install: Annotated[bool, typer.Option("--install", help="Merge kms into the host's config file.")] = False,
    uninstall: Annotated[
        bool, typer.Option("--uninstall", help="Remove kms from the host's config file; its token is revoked.")
    ] = False,
    path: Annotated[
        Path | None, typer.Option("--path", metavar="FILE", help="Another config file (e.g. a project's .mcp.json).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="claude-code: the .mcp.json document, not the command.")
    ] = False,
    http: Annotated[
        bool,
        typer.Option(
            "--http",
            help="Reach kms through the kms service (a token for this host; its secret stays out of the host's file).",
        ),
    ] = False,
    scopes: Annotated[
        str,
        typer.Option(
            "--scopes",
            help="With --http: the host token's scopes (e.g. 'tier:write folder:drafts'); your settings still apply.",
        ),
    ] = "tier:organize",
) -> None:
    """Give another agent host the kms server: print its config document, or --install it in place."""

    if host_arg and host_opt and host_arg != host_opt:
        say_error("invalid-input", f"two hosts given ({host_arg}, {host_opt}); give one")
        raise typer.Exit(2)
    if install and uninstall:
        say_error("invalid-input", "--install and --uninstall exclude each other")
        raise typer.Exit(2)
    try:
        host = hosts.get_host(host_arg or host_opt or "claude-code")
        if http:
            _http_config(host, install=install, uninstall=uninstall, path=path, scopes=scopes)
            return
        if uninstall:
            _uninstall(host, path)
            return
        entry = hosts.host_entry(host, standalone_kms_entry(load_settings(), db.default_db_path().resolve()))
        if install:
            target, backup = hosts.install(host, entry, path)
            say(f"kms installed for {host.label} in {target}" + (f" (backup: {backup})" if backup else ""), "green")
            return
    except KmsError as e:
        raise report_error(e) from None
    if as_json and host.name == "claude-code":
        doc, hint = hosts.document(host, entry), "Commit this as .mcp.json in a project."
    else:
        doc, hint = hosts.snippet(host, entry)
    sys.stdout.write(doc)
    sys.stdout.flush()
    say(hint, "dim")
