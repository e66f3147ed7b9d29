"""``kms config``: get/set/unset/list/path/edit over the schema in ``server.config.settings``.

All rules (types, validation, warnings, precedence) live in the core so the TUI's
settings screen behaves the same; this module only parses arguments and prints.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kmscli.output import Table, say_error
from server.config import schema
from server.config import settings as st
from server.config.redact import redact, redact_settings
from server.config.values import format_value
from server.index.privacy import hidden_counts, refresh_all
from server.store.db import connect, default_db_path

config_app = typer.Typer(
    help="Read and change kms settings (one TOML file; environment variables override keys).",
    no_args_is_help=True,
)


def complete_keys(incomplete: str) -> list[str]:
    """Shell completion for setting keys."""
    return [k for k in schema.SETTINGS if k.startswith(incomplete)]


def _fail(error: Exception, code: int = 2) -> NoReturn:
    """A refused setting (``invalid-input``, exit 2) or an editor that could not run (``editor``)."""
    say_error("invalid-input" if code == 2 else "editor", str(error))
    raise typer.Exit(code)


def print_warnings(lines: list[str]) -> None:
    if not lines:
        return

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for line in lines:
        err.print(f"[yellow]warning:[/] {escape(line)}", markup=True, highlight=False)


def _plain(value: Any) -> str:
    """Values as a script would want them: lists one per line, switches true/false."""
    if isinstance(value, list):
        return "\n".join(value)
    return format_value(value) if value is not None else ""


@config_app.command("get")
def get_cmd(
    key: Annotated[str, typer.Argument(help="Setting key, e.g. agent.write.", autocompletion=complete_keys)],
    json_output: Annotated[bool, typer.Option("--json", help="Print value, source and env var as JSON.")] = False,
) -> None:
    """Print one setting's effective value."""
    try:
        entry = st.get_value(key)
    except schema.SettingsError as e:
        _fail(e)
    if json_output:
        print(json.dumps(entry.to_json(), indent=2))
    else:
        text = _plain(entry.value)
        if text:
            print(text)


@config_app.command("set", context_settings={"ignore_unknown_options": True})
def set_cmd(
    key: Annotated[str, typer.Argument(help="Setting key.", autocompletion=complete_keys)],
    values: Annotated[list[str], typer.Argument(help="Value (several for list keys; quote globs).")],
) -> None:
    """Set a setting in the config file (lists take several values: 'drafts/*' inbox)."""
    try:
        warnings = st.set_value(key, values)
    except schema.SettingsError as e:
        _fail(e)
    entry = st.get_value(key)
    print(f"{key} = {format_value(entry.value)}")
    print_warnings(warnings)
    _apply_privacy(key)


def _apply_privacy(key: str) -> None:
    """A privacy rule takes effect now: the notes are judged again in the shared index, which
    every running server reads."""
    if not key.startswith("privacy."):
        return

    if not default_db_path().exists():
        return
    conn = connect(default_db_path())
    try:
        refresh_all(conn)
        counts = hidden_counts(conn)
    finally:
        conn.close()
    shown = ", ".join(f"{why}: {n}" for why, n in counts.items()) or "none"
    print(f"hidden from agents now: {shown}")


@config_app.command("unset")
def unset_cmd(
    key: Annotated[str, typer.Argument(help="Setting key.", autocompletion=complete_keys)],
) -> None:
    """Remove a setting from the config file (back to its default)."""
    try:
        removed = st.unset_value(key)
        entry = st.get_value(key)
    except schema.SettingsError as e:
        _fail(e)
    note = "" if removed else " (was not set in the file)"
    print(f"{key} = {format_value(entry.value)} ({entry.source}){note}")
    if entry.source == "env":
        print_warnings([f"${entry.setting.env} is set in the environment and still overrides {key}."])
    _apply_privacy(key)


@config_app.command("list")
def list_cmd(
    json_output: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    show_secrets: Annotated[bool, typer.Option("--show-secrets", help="Print secrets in clear.")] = False,
) -> None:
    """Every setting with its value and where it comes from (default, file, env); secrets redacted."""

    try:
        loaded = st.load_settings()
    except schema.SettingsError as e:
        _fail(e)
    entries = loaded.all_entries()
    if json_output:
        doc = {
            "path": str(loaded.path),
            "settings": [e.to_json() for e in entries],
            "custom_servers": {n: s.to_toml() for n, s in loaded.custom_servers.items()},
            "problems": loaded.problems,
            "upgraded": list(loaded.upgraded),
        }
        print(json.dumps(doc if show_secrets else redact(doc), indent=2))
        return

    table = Table(title=str(loaded.path), title_justify="left", show_lines=False)
    for col in ("key", "value", "source", "env"):
        table.add_column(col, overflow="fold")
    for entry in entries:
        value = format_value(entry.value) + (" (auto)" if entry.auto else "")
        value = value if show_secrets else redact_settings({entry.key: value})[entry.key]
        source = entry.source if entry.source != "env" else Text("env", style="cyan")
        table.add_row(entry.key, value, source, entry.setting.env)
    Console().print(table)
    for entry in entries:
        if entry.setting.means:
            print(f"{entry.key} allows:")
            for line in entry.setting.means(entry.value):
                print(f"  {line}")
    for line in loaded.upgraded:
        print(f"upgraded: {line}")
    if loaded.custom_servers:
        print(f"custom servers: {', '.join(loaded.custom_servers)} (kms servers list)")
    print_warnings(loaded.problems)


@config_app.command("path")
def path_cmd() -> None:
    """Print the config file's path ($KMS_CONFIG overrides it)."""
    print(st.default_config_path())


def _editor() -> list[str]:
    for var in ("VISUAL", "EDITOR"):
        if os.environ.get(var):
            return shlex.split(os.environ[var])
    for name in ("sensible-editor", "nano", "vi"):
        if shutil.which(name):
            return [name]
    _fail(RuntimeError("no editor found: set $EDITOR"), 1)


def _template() -> str:
    """A first config file: every key commented out at its default (uncommenting one is valid TOML)."""

    lines = ["# kms settings. `kms config list` shows effective values; docs/settings.md explains keys.", ""]
    for s in schema.SETTINGS.values():
        shown = '"auto"' if s.auto else '""' if s.default is None else json.dumps(s.default)
        lines += textwrap.wrap(s.description, 100, initial_indent="# ", subsequent_indent="# ")
        lines += [f"# {s.key} = {shown}", ""]
    return "\n".join(lines)


@config_app.command("edit")
def edit_cmd() -> None:
    """Open the config file in $EDITOR, then check it."""
    path: Path = st.default_config_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_template())
    editor = _editor()
    try:
        rc = subprocess.call([*editor, str(path)])
    except OSError as e:
        _fail(RuntimeError(f"could not start the editor {shlex.join(editor)}: {e}; set $EDITOR"), 1)
    if rc != 0:
        _fail(
            RuntimeError(
                f"the editor `{shlex.join(editor)}` exited with {rc}; {path} was not checked "
                "(`kms config list` checks it)"
            ),
            rc if 0 < rc < 126 else 1,
        )
    problems = st.load_settings().problems
    if problems:
        print_warnings(problems)
        raise typer.Exit(1)
    print(f"{path}: OK")
