"""The ``kms`` command: every command is a thin adapter over ``server``.

Commands live by group (``vault_cmds``: vaults; ``index_cmds``: the index; ``notes_cmds``: reading notes and
the write log; ``launcher``, ``config_cmd``, ``servers_cmd``...); ``kmscli.commands`` lists them (name, module,
panel, the line ``kms --help`` shows) and loads one only when it runs. This module builds the root.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Annotated

import typer

from kmscli.commands import LazyGroup
from server import installed_version

# ``kms vault ...`` and ``kms index`` once built only their own command to start faster; every command is
# loaded alone now (``kmscli.commands``), so ``build_app(only)`` is the whole (lazy) tree for any ``only``
ONLY = ("vault", "index")


def _new_app() -> typer.Typer:
    return typer.Typer(
        name="kms",
        help="Safe, fast, observable access to your Markdown notes for AI coding agents.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        cls=LazyGroup,
    )


def version_text() -> str:
    found = installed_version()
    return f"kms {found}" if found else "kms (not installed: version unknown)"


def _show_version(value: bool) -> None:
    if value:
        print(version_text())
        raise typer.Exit(0)


def root(
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print the version and exit.", is_eager=True, callback=_show_version)
    ] = False,
) -> None:
    """Safe, fast, observable access to your Markdown notes for AI coding agents."""


def build_app(only: str | None = None) -> typer.Typer:
    """The ``kms`` command tree: its root, over the command table (``kmscli.commands``), which loads each
    command when it runs. ``only`` is kept for callers of old; every tree is this one."""
    app = _new_app()
    app.callback()(root)
    return app


_full: list[typer.Typer] = []


def __getattr__(name: str) -> typer.Typer:
    """``app``, the whole tree (tests, completions), built when first asked for."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _full:
        _full.append(build_app())
    return _full[0]


def main() -> None:
    app = build_app()
    was_devnull = _stdout_is_devnull()
    try:
        app(prog_name="kms")
    except SystemExit as exit_:
        # stdout's reader went away: (typer's) click wraps stdout, rich points it at /dev/null; both exit 1
        if exit_.code == 1 and (
            type(sys.stdout).__name__ == "PacifyFlushWrapper" or (_stdout_is_devnull() and not was_devnull)
        ):
            _quiet_broken_pipe()
        _flush_stdout()
        raise
    except BrokenPipeError:
        _quiet_broken_pipe()
    _flush_stdout()


def _flush_stdout() -> None:
    """Without ``PYTHONUNBUFFERED`` a command's output may still sit in stdout's buffer when it returns:
    a reader that left (``| head -1``) is found here, not in the interpreter's exit flush (which would
    print ``Exception ignored ... BrokenPipeError`` and exit 120)."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # ValueError: stdout already closed
        _quiet_broken_pipe()


def _stdout_is_devnull() -> bool:
    try:
        out, null = os.fstat(1), os.stat(os.devnull)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) == (null.st_dev, null.st_ino)


def _quiet_broken_pipe() -> None:
    """``kms ... | head``: the reader has all it wanted, which is a success, said by nobody."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.__stdout__.fileno())  # type: ignore[union-attr]  # no error at exit's flush
    raise SystemExit(0)
