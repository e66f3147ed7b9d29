"""The CLI reference (docs/cli.md), generated from the Typer app itself: every command, its help, its
arguments and options. ``scripts/gen_cli_doc.py`` writes it; a test fails when it is stale, so a command
or option added without docs cannot land."""

from __future__ import annotations

from typing import Any

import typer

from kmscli.main import app
from kmscli.output import EXIT_FOR_KIND, EXIT_INTERRUPTED

# Typer's commands and parameters are its vendored click's: read them by what they have, not their class.


def is_group(command: Any) -> bool:
    return hasattr(command, "list_commands")


def walk_commands(group: Any, ctx: Any, prefix: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        path = f"{prefix} {name}"
        out.append((path, command))
        if is_group(command):
            out += walk_commands(command, ctx, path)
    return out


def is_option(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "option"


def _param_row(param: Any) -> str:
    if is_option(param):
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        about = (param.help or "").replace("|", "\\|").replace("\n", " ")
        default = param.default
        shown = "" if default in (None, False, (), []) or callable(default) else f" (default `{default}`)"
        return f"| {names} | {about}{' (required)' if param.required else shown} |"
    meta = (getattr(param, "metavar", None) or param.name or "").upper()
    about = (getattr(param, "help", None) or "").replace("|", "\\|").replace("\n", " ")
    return f"| `{meta}` | {about}{'' if param.required else ' (optional)'} |"


def cli_markdown() -> str:

    root = typer.main.get_command(app)
    ctx = root.make_context("kms", [], resilient_parsing=True)
    lines = [
        "# kms command reference",
        "",
        "Generated from the CLI by `python scripts/gen_cli_doc.py`; do not edit. Every command takes `--help`.",
        "",
    ]
    lines += _exit_codes()
    for path, command in walk_commands(root, ctx, "kms"):
        lines += [f"## `{path}`", ""]
        help_text: Any = command.help or command.short_help or ""
        lines += [str(help_text).strip(), ""]
        params = [p for p in command.params if not (is_option(p) and p.name == "help")]
        if params and not is_group(command):
            lines += ["| argument or option | about |", "| --- | --- |", *(_param_row(p) for p in params), ""]
    return "\n".join(lines).rstrip() + "\n"


def _exit_codes() -> list[str]:
    """The exit codes, from the table every command's errors go through."""

    by_code: dict[int, list[str]] = {}
    for kind, code in EXIT_FOR_KIND.items():
        by_code.setdefault(code, []).append(f"`{kind}`")
    rows = [
        "| 0 | done |",
        "| 1 | refused for any other kind of error (the message names it) |",
        *(f"| {code} | {', '.join(kinds)} |" for code, kinds in sorted(by_code.items())),
        f"| {EXIT_INTERRUPTED} | `kms vault add`, `kms index` or `kms embed` stopped by Ctrl-C; the message says"
        " what was kept and what to run next |",
    ]
    return [
        "## Exit codes",
        "",
        "An error is one line, `error (KIND): message`, on standard error, never a traceback. A command line",
        "that does not parse exits 2 too. `kms hook` always exits 0 (fail-open).",
        "",
        "| code | when |",
        "| --- | --- |",
        *rows,
        "",
    ]
