"""``kms vault ...`` and ``kms index`` build only their own command (``kmscli.main.ONLY``): the same
command as in the whole tree, with less start-up. One subprocess shows what such a process imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from support.vaults import write
from typer.testing import CliRunner

from kmscli.main import ONLY, app, build_app


def run(tree: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"}).invoke(tree, list(args), prog_name="kms")
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("index", "--help"),
        ("vault", "--help"),
        ("vault", "add", "--help"),
        ("vault",),
        ("vault", "bogus"),
        ("index", "--bogus"),
        ("vault", "add"),
        ("vault", "set", "x"),
    ],
)
def test_the_command_alone_answers_as_in_the_whole_tree(args: tuple[str, ...]) -> None:
    assert run(build_app(args[0]), *args) == run(app, *args)


def test_vault_add_then_index_through_the_commands_alone(tmp_path: Path) -> None:
    root = tmp_path / "v"
    write(root / "a.md", "# A\nsee [[b]] #t\n")
    write(root / "b.md", "# B\n")
    code, out, _ = run(build_app("vault"), "vault", "add", str(root), "--name", "mine")
    assert code == 0 and "mine: 2 files, +2 new" in out
    write(root / "c.md", "# C\n[[a]]\n")
    code, out, _ = run(build_app("index"), "index")
    assert code == 0 and "mine: 3 files, +1 new" in out
    code, out, _ = run(app, "backlinks", "a")
    assert code == 0 and "c.md" in out


def test_a_vault_or_index_process_imports_no_other_command_module(tmp_path: Path) -> None:
    """What ``python -m kmscli index --help`` loads, reported at exit."""
    probe = (
        "import atexit, json, runpy, sys\n"
        "atexit.register(lambda: sys.stderr.write(json.dumps(sorted(m for m in sys.modules"
        " if m.startswith('kmscli')))))\n"
        "sys.argv = ['kms', *sys.argv[1:]]\n"
        "runpy.run_module('kmscli', run_name='__main__', alter_sys=True)\n"
    )
    env = {**os.environ, "KMS_DB_PATH": str(tmp_path / "kms.db"), "KMS_CONFIG": str(tmp_path / "none.toml")}
    for first in ONLY:
        done = subprocess.run(
            [sys.executable, "-c", probe, first, "--help"], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, done.stderr
        loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
        assert "kmscli.index_cmds" in loaded
        assert not loaded & {
            "kmscli.notes_cmds",
            "kmscli.doctor",
            "kmscli.launcher",
            "kmscli.config_cmd",
            "kmscli.changes_cmds",
            "kmscli.control_cmds",
            "kmscli.servers_cmd",
        }, loaded
