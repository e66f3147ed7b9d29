"""``kms --help`` lists every command from the table in ``kmscli.commands`` without importing a command
module; each row's line is what its command shows once loaded, and the listing is the same either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
import typer

from kmscli.commands import TABLE, LazyGroup, load, summary
from kmscli.main import build_app


def test_each_rows_line_is_what_its_command_shows() -> None:
    for entry in TABLE:
        command = load(entry, ["--help"])
        assert command.name == entry.name and command.rich_help_panel == entry.panel
        shown = command.short_help or summary(command.help)
        assert entry.listed == shown, entry.name


def test_the_listing_is_the_same_with_every_command_loaded(capsys: pytest.CaptureFixture[str]) -> None:
    lazy, loaded = (
        cast(LazyGroup, typer.main.get_command(build_app())),
        cast(LazyGroup, typer.main.get_command(build_app())),
    )
    ctx = loaded.make_context("kms", [], resilient_parsing=True)
    for entry in TABLE:
        loaded.get_command(ctx, entry.name)  # loads it
    assert [c.name for c in loaded.commands.values()] == [e.name for e in TABLE]  # in the table's order
    lazy.get_help(lazy.make_context("kms", [], resilient_parsing=True))  # (Rich prints it)
    listed = capsys.readouterr().out
    assert not lazy.commands and "repair" in listed
    loaded.get_help(ctx)
    assert listed == capsys.readouterr().out


def test_kms_help_imports_no_command_module(tmp_path: Path) -> None:
    probe = (
        "import atexit, json, runpy, sys\n"
        "atexit.register(lambda: sys.stderr.write(json.dumps(sorted(m for m in sys.modules"
        " if m.startswith(('kmscli', 'server.mcp', 'tui'))))))\n"
        "sys.argv = ['kms', *sys.argv[1:]]\n"
        "runpy.run_module('kmscli', run_name='__main__', alter_sys=True)\n"
    )
    env = {**os.environ, "KMS_DB_PATH": str(tmp_path / "kms.db"), "KMS_CONFIG": str(tmp_path / "none.toml")}
    done = subprocess.run([sys.executable, "-c", probe, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    modules = {e.target.split(":")[0] for e in TABLE}
    assert "kmscli.commands" in loaded and not loaded & modules, loaded & modules
    assert not {m for m in loaded if m.startswith(("server.mcp", "tui"))}
