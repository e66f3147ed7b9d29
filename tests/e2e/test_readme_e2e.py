"""The README's slow commands, as written, in a fresh copy of the checkout and a newcomer's HOME (issue 38):
the first of the two commands (a venv, an editable install, the demo in the dashboard, quit with q), and the
install section (a wheel, pipx, ``kms --version``, the demo as text). Packages come from the registry pip is
set up for, as on a person's machine; tests/cli/test_readme.py says how every other command is checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.readme import checkout_copy, in_terminal, readme_commands, run_as_written

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]  # a venv and every dependency, twice


def test_the_first_command_sets_up_and_shows_the_demo_in_the_dashboard(tmp_path: Path) -> None:
    home, work = tmp_path / "home", checkout_copy(tmp_path / "kms")
    home.mkdir()
    [first] = [c for c in readme_commands() if c.endswith(".venv/bin/kms demo")]
    with in_terminal(first, home, cwd=work, first=()) as terminal:
        terminal.wait_for(lambda screen: "The demo is over" in screen, "the end of the demo", timeout=600)
        terminal.press("q")
        assert terminal.exit_code() == 0, terminal.screen()
    assert (work / ".venv" / "bin" / "kms").exists()


def test_the_install_section_installs_kms_with_pipx_from_a_wheel(tmp_path: Path) -> None:
    home, work = tmp_path / "home", checkout_copy(tmp_path / "kms")
    home.mkdir()
    tools = tmp_path / "pipx-venv"  # the person's pipx; the registry has it
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True, timeout=120)
    subprocess.run([tools / "bin" / "python", "-m", "pip", "install", "-q", "pipx"], check=True, timeout=300)
    shown = readme_commands()
    block = shown[shown.index("python3 -m pip wheel --no-deps -w dist .") :][:4]
    assert block[1].startswith("pipx install") and block[2] == "kms --version", block
    first = (home / ".local" / "bin", tools / "bin")  # pipx puts `kms` in ~/.local/bin
    for command in block:
        done = run_as_written(command, home, cwd=work, timeout=600, first=first)
        assert done.returncode == 0, f"{command!r} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stdout + done.stderr, command
    assert (home / ".local" / "bin" / "kms").exists()
