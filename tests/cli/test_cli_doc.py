"""docs/cli.md is the CLI's own reference: generated from the Typer app, current, and every command, argument
and option in it has help text (a command or option added without docs fails here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer.main

from kmscli.cli_doc import cli_markdown, is_group, is_option, walk_commands
from kmscli.main import app

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_is_current() -> None:
    assert (ROOT / "docs" / "cli.md").read_text() == cli_markdown(), "run: python scripts/gen_cli_doc.py"
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_doc.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr


def test_every_command_argument_and_option_says_what_it_is_for() -> None:
    root = typer.main.get_command(app)
    ctx = root.make_context("kms", [], resilient_parsing=True)
    commands = walk_commands(root, ctx, "kms")
    assert {"kms serve", "kms service start", "kms token create", "kms claude", "kms mcp-config"} <= {
        path for path, _ in commands
    }
    missing = []
    for path, command in commands:
        if not (command.help or command.short_help):
            missing.append(path)
        if is_group(command):
            continue
        for param in command.params:
            if param.name != "help" and not getattr(param, "help", None):
                missing.append(f"{path} {'option' if is_option(param) else 'argument'} {param.name}")
    assert missing == [], missing
