"""The ``kms`` command: every command is a thin adapter over ``server``.

Commands live by group (``index_cmds``: vaults and the index; ``notes_cmds``: reading notes and
the write log; ``launcher``, ``config_cmd``, ``servers_cmd``); this module only puts them together,
in the order ``kms --help`` lists them.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kmscli import index_cmds, notes_cmds, repair_cmd
from kmscli.config_cmd import config_app
from kmscli.launcher import CLAUDE_CONTEXT_SETTINGS, claude_command, doctor_command, mcp_config_command
from kmscli.output import KmsGroup, console
from kmscli.servers_cmd import servers_app
from server.store.db import default_db_path

app = typer.Typer(
    name="kms",
    help="Safe, fast, observable access to your Markdown notes for AI coding agents.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    cls=KmsGroup,
)


def mcp_cmd() -> None:
    """Serve the vault to an agent over MCP (stdio). Configured by KMS_* environment variables."""
    from server.mcp.serve import main as serve

    sys.exit(serve())


def demo_cmd(
    headless: Annotated[bool, typer.Option("--headless", help="Print the story as text instead of the dashboard.")]
    = False,
) -> None:
    """Zero-setup demo: a scripted agent works on a copy of the sample vault while you watch."""
    import anyio

    from kmscli.demo import prepare, run_story

    ws = prepare()
    console.print(f"[dim]demo workspace: {ws.root} (sample vault copy, private database)[/]")
    styles = {"step": "bold", "ok": "green", "denied": "yellow", "info": "cyan"}

    if headless:
        def emit(kind: str, text: str) -> None:
            console.print(f"[{styles[kind]}]{'▶ ' if kind == 'step' else ''}{text}[/]", highlight=False)

        summary = anyio.run(run_story, ws, emit)
        ok = summary["writes"] >= 3 and summary["denied"] >= 1 and summary["rate_limited"] >= 1
        raise typer.Exit(0 if ok else 1)

    import threading

    from tui.app import create_app

    dashboard = create_app(ws.db_path, settings_path=ws.config_path)
    lines: list[str] = []

    def run_agent() -> None:
        anyio.run(run_story, ws, lambda kind, text: lines.append(text), 1.0)

    threading.Thread(target=run_agent, name="kms-demo-agent", daemon=True).start()
    dashboard.run()
    for line in lines:
        console.print(line, highlight=False)


def tui_cmd() -> None:
    """Live dashboard: agent sessions, writes (with review and revert), reads and settings."""
    from tui.app import create_app

    create_app(default_db_path()).run()


app.add_typer(index_cmds.vault_app, name="vault")
app.command("index")(index_cmds.index_cmd)
app.command("status")(index_cmds.status_cmd)
app.command("search")(notes_cmds.search_cmd)
app.command("show")(notes_cmds.show_cmd)
app.command("tags")(notes_cmds.tags_cmd)
app.command("recent")(notes_cmds.recent_cmd)
app.command("backlinks")(notes_cmds.backlinks_cmd)
app.command("hide")(notes_cmds.hide_cmd)
app.command("unhide")(notes_cmds.unhide_cmd)
app.command("watch")(index_cmds.watch_cmd)
app.command("mcp")(mcp_cmd)
app.add_typer(config_app, name="config")
app.add_typer(servers_app, name="servers")
app.command("claude", context_settings=CLAUDE_CONTEXT_SETTINGS)(claude_command)
app.command("doctor")(doctor_command)
app.command("repair")(repair_cmd.repair_cmd)
app.command("mcp-config")(mcp_config_command)
app.command("log")(notes_cmds.log_cmd)
app.command("demo")(demo_cmd)
app.command("tui")(tui_cmd)
app.command("embed")(index_cmds.embed_cmd)
app.add_typer(index_cmds.model_app, name="model")


def main() -> None:
    app(prog_name="kms")
