"""Every command the README shows works as written (issue 38): run in bash, in a newcomer's fresh HOME with
no ``KMS_*`` variable, ``kms`` from PATH. ``HOW`` says how each one is checked, so a command added to the
README without a way to check it fails here; the slow ones (a fresh venv, a wheel, pipx) are in
tests/e2e/test_readme_e2e.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.readme import in_terminal, readme_commands, run_as_written
from support.vaults import SAMPLE_VAULT

RUN = "run here, in order, exit 0"
E2E = "tests/e2e/test_readme_e2e.py (a fresh copy of the checkout: a venv, a wheel, pipx)"
NAME = "a command's name in a sentence: `kms NAME --help` answers"
TERMINAL = "run here in a real terminal (tmux), quit with q, exit 0"
HOW: dict[str, str] = {
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/kms demo": E2E,
    "bash scripts/test.sh": ".ci/run runs exactly this (the suite cannot run itself)",
    "python3 -m pip wheel --no-deps -w dist .": E2E,
    "pipx install dist/kms_notes-*.whl": E2E,
    "kms --version": E2E,
    "kms demo --headless               # the story above, as text, no vault of yours needed": E2E,
    "kms vault add ~/Notes                 # register and index a vault (your files are only ever read)": RUN,
    'kms search "error handling"           # what an agent would find (--semantic: hybrid search)': RUN,
    "kms claude                            # Claude Code with the kms tools (read-only by default)": (
        "tests/e2e/test_claude_interactive_e2e.py: `kms claude` in a terminal with the real Claude Code"
    ),
    "kms tui                               # watch, review, approve and revert what agents do, live": TERMINAL,
    "kms config set write.allowlist 'drafts/*'   # where agents may write: the notes directly in drafts/ "
    "('drafts': and below)": RUN,
    "kms config set agent.write on         # then let agents write there": RUN,
    "kms claude": NAME,
    "kms tui": NAME,
    "kms hide": NAME,
    "kms trash empty": NAME,
    "kms mcp": NAME,
    "kms demo": NAME,
    "kms model download": "fetches the model from its hub, out of reach here; `kms model download --from DIR` and "
    "the registry's model are tested in tests/cli/test_cli_index_embed.py",
    "kms config set embed.download on": RUN,
    "kms token create --label notes-bot --scopes 'tier:write folder:drafts'": RUN,
    "kms mcp-config cursor --install": RUN,
}


def test_every_command_in_the_readme_has_a_way_to_be_checked() -> None:
    shown = readme_commands()
    assert shown, "no command read out of the README"
    assert [c for c in shown if c not in HOW] == [], "a README command with no check: add it to HOW"
    assert [c for c in HOW if c not in shown] == [], "HOW names a command the README no longer shows"


def test_the_readme_commands_run_as_written_for_a_newcomer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copytree(SAMPLE_VAULT, home / "Notes")  # the person's own notes, where the tour says
    for command in readme_commands():
        how = HOW[command]
        if how == NAME:
            command = f"{command} --help"
        elif how != RUN:
            continue
        done = run_as_written(command, home, cwd=home)
        assert done.returncode == 0, f"{command!r} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr + done.stdout, command
        if command.startswith("kms search"):
            assert "error" in done.stdout.lower(), done.stdout
    assert (home / ".config" / "kms" / "config.toml").exists(), "the settings went to the person's own folder"


def test_the_dashboard_command_opens_and_quits_with_q(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copytree(SAMPLE_VAULT, home / "Notes")
    assert run_as_written("kms vault add ~/Notes", home, cwd=home).returncode == 0
    [command] = [c for c, how in HOW.items() if how == TERMINAL]
    with in_terminal(command, home, cwd=home) as terminal:
        terminal.wait_for(lambda screen: "Sessions" in screen, "the dashboard", timeout=90)
        terminal.press("q")
        assert terminal.exit_code() == 0, terminal.screen()
