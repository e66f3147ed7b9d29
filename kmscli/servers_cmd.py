"""``kms servers``: the MCP servers a ``kms claude`` session gets.

Built-ins (kms, playwright, filesystem) are switched with their settings keys; custom
servers are ``[servers.custom.NAME]`` tables in the config file. Listings redact secrets
because people paste them into bug reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from kmscli.compose import BUILTIN_BUILDERS, Session, custom_entry
from kmscli.config_cmd import print_warnings
from kmscli.output import say_error
from server.config import schema
from server.config import servers as cs
from server.config import settings as st
from server.config.redact import redact
from server.store import db

servers_app = typer.Typer(help="MCP servers for `kms claude` sessions (built-in and your own).", no_args_is_help=True)


def complete_server_names(incomplete: str) -> list[str]:
    """Shell completion: built-in and custom server names."""
    try:
        custom = list(st.load_settings(has_vault=False).custom_servers)
    except Exception:
        custom = []
    return [n for n in [*BUILTIN_BUILDERS, *custom] if n.startswith(incomplete)]


def _fail(message: str, code: int = 2) -> NoReturn:
    """The one error voice (``error (KIND): message``): a refused argument, or a server that is not there."""
    say_error("not-found" if code == 3 else "invalid-input", message)
    raise typer.Exit(code)


def _pairs(items: list[str], sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            _fail(f"{what} {item!r} must look like NAME{sep}VALUE")
        out[key.strip()] = value.strip() if sep == ":" else value
    return out


@servers_app.command("add")
def add_cmd(
    name: Annotated[str, typer.Argument(help="A name for the server (letters, digits, - and _).")],
    command: Annotated[
        list[str] | None,
        typer.Argument(help="For a stdio server: the command and its arguments, after --.", show_default=False),
    ] = None,
    url: Annotated[str | None, typer.Option("--url", help="For an HTTP server: its URL.")] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", "-e", help="Environment variable K=V for a stdio server (repeat)."),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", help="HTTP header 'K: V' for an HTTP server (repeat)."),
    ] = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Add it switched off.")] = False,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite a server with the same name.")] = False,
) -> None:
    """Add a custom server: `kms servers add NAME -- COMMAND ARGS...` or `kms servers add NAME --url URL`."""
    if bool(command) == bool(url):
        _fail("give either a command after -- (stdio) or --url (http), not both or neither")
    if url and env:
        _fail("--env is for stdio servers; use --header for HTTP servers")
    if command and header:
        _fail("--header is for HTTP servers; use --env for stdio servers")
    if url:
        server = cs.CustomServer(name, url=url, headers=_pairs(header or [], ":", "header"), enabled=not disabled)
    else:
        assert command
        server = cs.CustomServer(
            name,
            command=command[0],
            args=command[1:],
            env=_pairs(env or [], "=", "--env"),
            enabled=not disabled,
        )
    try:
        st.add_custom_server(server, replace=replace)
    except schema.SettingsError as e:
        _fail(str(e))
    shown = redact({"mcpServers": {name: custom_entry(server)}})["mcpServers"][name]
    print(f"added {name} ({server.kind}{', disabled' if disabled else ''}): {json.dumps(shown)}")


def _rows(show_secrets: bool = False) -> list[dict[str, Any]]:
    shown = (lambda doc: doc) if show_secrets else redact
    loaded = st.load_settings()
    preview = Session("preview", db.default_db_path().resolve(), Path.cwd())
    out: list[dict[str, Any]] = []
    for name, build in BUILTIN_BUILDERS.items():
        key = "kms.enabled" if name == "kms" else f"servers.{name}.enabled"
        forced = loaded.with_override(key, True)  # show what it would run even when off
        if name == "kms":  # sessions get kms only when agents may read
            forced = forced.with_override("agent.read", True)
        built = build(forced, preview)
        entry = shown({"mcpServers": {name: built[1]}})["mcpServers"][name] if built else {}
        out.append(
            {
                "name": name,
                "builtin": True,
                "enabled": loaded.active("agent.read") if name == "kms" else bool(loaded.get(key)),
                "kind": "stdio",
                "key": key,
                **entry,
            }
        )
    for name, server in sorted(loaded.custom_servers.items()):
        entry = shown({"mcpServers": {name: custom_entry(server)}})["mcpServers"][name]
        out.append({"name": name, "builtin": False, "enabled": server.enabled, "kind": server.kind, **entry})
    return out


@servers_app.command("list")
def list_cmd(
    json_output: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    show_secrets: Annotated[bool, typer.Option("--show-secrets", help="Print secrets in clear.")] = False,
) -> None:
    """Built-in and custom servers, whether each is on, and what it runs (secrets redacted)."""
    rows = _rows(show_secrets)
    if json_output:
        print(json.dumps(rows, indent=2))
        return

    table = Table()
    for col in ("name", "on", "kind", "runs"):
        table.add_column(col, overflow="fold")
    for r in rows:
        runs = r.get("url") or " ".join([r.get("command", ""), *r.get("args", [])])
        if r["name"] == "kms":
            runs = "kms mcp (this install)"
        table.add_row(
            r["name"] + ("" if r["builtin"] else " (custom)"),
            "yes" if r["enabled"] else "no",
            r["kind"],
            runs,
        )
    Console().print(table)


@servers_app.command("remove")
def remove_cmd(
    name: Annotated[str, typer.Argument(help="Custom server name.", autocompletion=complete_server_names)],
) -> None:
    """Remove a custom server."""
    if name in BUILTIN_BUILDERS:
        _fail(f"{name} is built in and cannot be removed; switch it off with: kms servers disable {name}")
    if not st.remove_custom_server(name):
        _fail(f"no custom server named {name!r} (kms servers list)")
    print(f"removed {name}")


def _switch(name: str, on: bool) -> None:
    try:
        warnings = st.set_server_enabled(name, on)
    except schema.SettingsError as e:
        _fail(str(e))
    print(f"{name}: {'enabled' if on else 'disabled'}")
    if warnings:
        print_warnings(warnings)


@servers_app.command("enable")
def enable_cmd(
    name: Annotated[str, typer.Argument(help="Server name.", autocompletion=complete_server_names)],
) -> None:
    """Switch a server on for future sessions."""
    _switch(name, True)


@servers_app.command("disable")
def disable_cmd(
    name: Annotated[str, typer.Argument(help="Server name.", autocompletion=complete_server_names)],
) -> None:
    """Switch a server off for future sessions."""
    _switch(name, False)
