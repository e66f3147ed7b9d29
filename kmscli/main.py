"""The ``kms`` command: every command is a thin adapter over ``server``.

Commands live by group (``vault_cmds``: vaults; ``index_cmds``: the index; ``notes_cmds``: reading notes and
the write log; ``launcher``, ``config_cmd``, ``servers_cmd``); this module only puts them together,
in the order ``kms --help`` lists them.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from kmscli import index_cmds
from kmscli.output import KmsGroup, console
from server.store.db import default_db_path

if TYPE_CHECKING:
    from kmscli.demo import DemoWorkspace

# The commands a first run and a reindex start (``kms vault add``, ``kms index``): built alone, so their
# process imports no other command module and builds no other command (start-up: bench/bench_core.py).
ONLY = ("vault", "index")


def _flags_without_metavar() -> None:
    """Typer shows a ``<bool>`` type after every flag in ``--help`` (``--json <bool>``), which reads as if
    the flag took a value; flags take none, so they show none."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "_kms", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag and self.metavar is None else shown(self, ctx)

    display_type_rich._kms = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_without_metavar()


def _new_app() -> typer.Typer:
    return typer.Typer(
        name="kms",
        help="Safe, fast, observable access to your Markdown notes for AI coding agents.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        cls=KmsGroup,
    )


def version_text() -> str:
    from server import installed_version

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


def mcp_cmd() -> None:
    """Serve the vault to an agent over MCP (stdio). Configured by KMS_* environment variables."""
    from server.mcp.serve import main as serve

    sys.exit(serve())


def demo_cmd(
    headless: Annotated[
        bool, typer.Option("--headless", help="Print the story as text instead of the dashboard.")
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the demo's temporary workspace (its path is printed).")
    ] = False,
    step_timeout: Annotated[
        float,
        typer.Option(
            "--step-timeout",
            metavar="SECONDS",
            min=0.1,
            help="How long one step of the story may take before the demo calls it failed (and exits 1).",
        ),
    ] = 60.0,
) -> None:
    """Zero-setup demo: a scripted agent works on a copy of the sample vault while you watch."""
    import shutil

    from kmscli.demo import prepare

    ws = prepare()
    try:
        code = _run_demo(ws, headless, step_timeout)
    finally:
        if keep:
            console.print(f"[dim]demo workspace kept: {ws.root}[/]", highlight=False)
        else:
            shutil.rmtree(ws.root, ignore_errors=True)
    raise typer.Exit(code)


def _run_demo(ws: DemoWorkspace, headless: bool, step_timeout: float) -> int:
    """The story as text, or live in the dashboard (its lines printed after it). Exit 1 when a step failed or
    stalled past ``step_timeout`` (the failed step is shown as it happens and in the text after), or when the
    story did not show every guard."""
    import anyio

    from kmscli.demo import run_story

    styles = {"step": "bold", "ok": "green", "denied": "yellow", "info": "cyan", "failed": "bold red"}
    marks = {"step": "▶ ", "failed": "✗ "}
    if headless:

        def emit(kind: str, text: str) -> None:  # the story's text holds note titles: never read as markup
            console.print(Text(marks.get(kind, "") + text, style=styles[kind]), highlight=False)

        summary = anyio.run(run_story, ws, emit, 0.0, step_timeout)
        return _demo_code(summary)

    import threading

    from tui.app import create_app

    dashboard = create_app(ws.db_path, settings_path=ws.config_path)
    lines: list[str] = []
    outcome: dict[str, Any] = {}

    def narrate(kind: str, text: str) -> None:
        lines.append(f"{marks.get(kind, '')}{text}")
        try:
            dashboard.call_from_thread(dashboard.narrate, kind, text)
        except RuntimeError:  # the dashboard is not running (yet, or any more): the text is printed after
            pass

    def run_agent() -> None:
        try:
            outcome["summary"] = anyio.run(run_story, ws, narrate, 1.0, step_timeout)
        except Exception as e:  # run_story reports its steps' failures; this is one outside them
            narrate("failed", f"step failed: the demo itself: {type(e).__name__}: {e}")
        failed = outcome.get("summary", {}).get("failed", "the demo itself")
        end = "The demo is over: press q to quit." if failed is None else f"The demo stopped: {failed}. Press q."
        try:
            dashboard.call_from_thread(dashboard.narrate, "end" if failed is None else "failed-end", end)
        except RuntimeError:
            pass

    threading.Thread(target=run_agent, name="kms-demo-agent", daemon=True).start()
    dashboard.run()
    for line in lines:
        console.print(line, highlight=False)
    if "summary" not in outcome:  # quit before the story ended, or it broke: not a demo that worked
        return 1 if any(line.startswith(marks["failed"]) for line in lines) else 0
    return _demo_code(outcome["summary"])


def _demo_code(summary: dict[str, Any]) -> int:
    """0 only when every step went as told and the story showed each guard (a write, a refusal, the limit)."""
    if summary["failed"] is not None:
        return 1
    return 0 if summary["writes"] >= 3 and summary["denied"] >= 1 and summary["rate_limited"] >= 1 else 1


def tui_cmd() -> None:
    """Live dashboard: agent sessions, writes (with review and revert), reads and settings."""
    from tui.app import create_app

    create_app(default_db_path()).run()


def hook_cmd(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="EVENT (session-start, user-prompt-submit, post-tool-use, pre-compact, post-compact, stop, "
            "session-end) [--contract FILE]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """An agent host's command hook: the event's JSON on stdin, kms's answer on stdout (docs/hooks.md).
    Fail-open: it always exits 0."""
    from kmscli.hook_cmd import main as hook

    raise typer.Exit(hook(args or []))


# ``kms --help`` lists the commands in these panels, in this order (``vault`` first: a newcomer's first need).
VAULTS, AGENTS, REVIEW, SERVICE, SETTINGS = "Vaults", "Agents", "Review", "Service", "Settings"


def summary(doc: str | None) -> str | None:
    """A command's first paragraph as one line: the listing in ``kms --help`` showed a docstring's own
    line breaks mid-sentence."""
    return " ".join(doc.split("\n\n", 1)[0].split()) if doc else None


def command(app: typer.Typer, name: str, fn: Any, panel: str, **kwargs: Any) -> None:
    app.command(name, rich_help_panel=panel, short_help=summary(fn.__doc__), **kwargs)(fn)


def build_app(only: str | None = None) -> typer.Typer:
    """The ``kms`` command tree, in the order ``kms --help`` lists it; ``only`` (one of ``ONLY``): that
    command alone, for a process that runs it."""
    app = _new_app()
    app.callback()(root)
    if only in (None, "vault"):
        from kmscli.vault_cmds import vault_app

        app.add_typer(vault_app, name="vault", rich_help_panel=VAULTS)
    if only in (None, "index"):
        command(app, "index", index_cmds.index_cmd, VAULTS)
    if only is None:
        _add_the_rest(app)
    return app


def _add_the_rest(app: typer.Typer) -> None:
    from kmscli import changes_cmds, control_cmds, history_cmds, notes_cmds, repair_cmd
    from kmscli.config_cmd import config_app
    from kmscli.conflict_cmds import conflicts_app
    from kmscli.doctor import doctor_command
    from kmscli.hosts_cmd import mcp_config_command
    from kmscli.launcher import CLAUDE_CONTEXT_SETTINGS, claude_command
    from kmscli.plugin_cmds import hooks_app, plugin_app
    from kmscli.servers_cmd import servers_app
    from kmscli.service_cmds import serve_cmd, service_app, token_app

    vaults: tuple[tuple[str, Any], ...] = (
        ("status", index_cmds.status_cmd),
        ("search", notes_cmds.search_cmd),
        ("show", notes_cmds.show_cmd),
        ("tags", notes_cmds.tags_cmd),
        ("properties", notes_cmds.properties_cmd),
        ("recent", notes_cmds.recent_cmd),
        ("backlinks", notes_cmds.backlinks_cmd),
        ("unresolved", notes_cmds.unresolved_cmd),
        ("hide", notes_cmds.hide_cmd),
        ("unhide", notes_cmds.unhide_cmd),
        ("hidden", notes_cmds.hidden_cmd),
        ("watch", index_cmds.watch_cmd),
        ("embed", index_cmds.embed_cmd),
    )
    for name, fn in vaults:
        command(app, name, fn, VAULTS)
    app.add_typer(index_cmds.model_app, name="model", rich_help_panel=VAULTS)

    command(app, "claude", claude_command, AGENTS, context_settings=CLAUDE_CONTEXT_SETTINGS)
    command(app, "mcp-config", mcp_config_command, AGENTS)
    command(app, "mcp", mcp_cmd, AGENTS)
    command(app, "hook", hook_cmd, AGENTS, context_settings={"ignore_unknown_options": True})
    app.add_typer(hooks_app, name="hooks", rich_help_panel=AGENTS)
    app.add_typer(plugin_app, name="plugin", rich_help_panel=AGENTS)
    app.add_typer(servers_app, name="servers", rich_help_panel=AGENTS)
    command(app, "demo", demo_cmd, AGENTS)

    command(app, "tui", tui_cmd, REVIEW)
    review: tuple[tuple[str, Any], ...] = (
        ("pending", control_cmds.pending_cmd),
        ("approve", control_cmds.approve_cmd),
        ("reject", control_cmds.reject_cmd),
        ("log", notes_cmds.log_cmd),
        ("revert", changes_cmds.revert_cmd),
    )
    for name, fn in review:
        command(app, name, fn, REVIEW)
    app.add_typer(control_cmds.session_app, name="session", rich_help_panel=REVIEW)
    command(app, "diff", history_cmds.diff_cmd, REVIEW)
    command(app, "restore", history_cmds.restore_cmd, REVIEW)
    app.add_typer(history_cmds.history_app, name="history", rich_help_panel=REVIEW)
    app.add_typer(changes_cmds.trash_app, name="trash", rich_help_panel=REVIEW)
    app.add_typer(conflicts_app, name="conflicts", rich_help_panel=REVIEW)

    command(app, "serve", serve_cmd, SERVICE)
    app.add_typer(service_app, name="service", rich_help_panel=SERVICE)
    app.add_typer(token_app, name="token", rich_help_panel=SERVICE)

    app.add_typer(config_app, name="config", rich_help_panel=SETTINGS)
    command(app, "doctor", doctor_command, SETTINGS)
    command(app, "repair", repair_cmd.repair_cmd, SETTINGS)


_full: list[typer.Typer] = []


def __getattr__(name: str) -> typer.Typer:
    """``app``, the whole tree (tests, completions), built when first asked for."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _full:
        _full.append(build_app())
    return _full[0]


def main() -> None:
    first = sys.argv[1] if len(sys.argv) > 1 else None
    app = build_app(first) if first in ONLY else build_app()
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
    import os

    try:
        out, null = os.fstat(1), os.stat(os.devnull)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) == (null.st_dev, null.st_ino)


def _quiet_broken_pipe() -> None:
    """``kms ... | head``: the reader has all it wanted, which is a success, said by nobody."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.__stdout__.fileno())  # type: ignore[union-attr]  # no error at exit's flush
    raise SystemExit(0)
