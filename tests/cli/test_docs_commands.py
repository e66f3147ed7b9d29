"""The commands docs/*.md shows in its shell blocks, run as written in a newcomer's HOME (issue 38), the same
way tests/cli/test_readme.py runs the README's. ``HOW`` gives each line a way to be checked or the reason it
is not run here; a shell block added to a doc without an entry fails the first test."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from support.claude_cli import claude_bin
from support.readme import FENCE, run_as_written
from support.vaults import SAMPLE_VAULT

DOCS = Path(__file__).resolve().parents[2] / "docs"
DATA = Path(__file__).resolve().parents[1] / "data" / "vaults"
RUN = "run here, in order, exit 0"
CLAUDE = "Claude Code itself: tests/e2e/test_claude_*_e2e.py run `kms claude` with the real CLI"
TERMINAL = "the dashboard: tests/cli/test_readme.py opens `kms tui` in a real terminal"
ASKS = "asks before it changes anything: its confirmation is tested in process (tests/cli)"
ID = "a placeholder id (42, SID) of the reader's own: the command is tested with real ids in tests/cli"
HOW: dict[str, dict[str, str]] = {
    "usage.md": {
        "kms vault add ~/Notes": RUN,
        "kms vault add ~/dendron": RUN,
        'kms search "error handling"': RUN,
        "kms search '\"数据库迁移\" OR 集群'": RUN,
        "kms config set privacy.hide_folders 'journal/**' 'areas/health/**'": RUN,
        "kms config set privacy.hide_tags private 'personal/*'": RUN,
        'kms hide "Lawyer letters"': RUN,
        "kms hidden --why": RUN,
        "kms claude": CLAUDE,
        "kms claude --vault work": CLAUDE,
        'kms claude -p "summarize my notes"': CLAUDE,
        "kms claude --resume ID": CLAUDE,
        "kms config set agent.write on": RUN,
        "kms config set write.allowlist drafts 'inbox/*'": RUN,
        "kms config set agent.edit on": RUN,
        "kms config set agent.organize on": RUN,
        "kms tui": TERMINAL,
        "kms log": RUN,
        "kms revert 42": ID,
        "kms claude --write --approve": CLAUDE,
        "kms pending": RUN,
        "kms session list": RUN,
        "kms session undo SID": ID,
        "kms trash list": RUN,
        "kms doctor": RUN,
        "kms repair": ASKS,
    },
}


def doc_commands(name: str) -> list[str]:
    """Each command of a doc's shell blocks, without its comment (a line that is only a comment is none)."""
    text = (DOCS / name).read_text(encoding="utf-8")
    lines = [line for block in FENCE.findall(text) for line in block.splitlines()]
    return [c for c in (re.sub(r"\s+#.*$", "", line).strip() for line in lines) if c and not c.startswith("#")]


def test_every_doc_with_a_shell_block_says_how_each_command_is_checked() -> None:
    shown = {p.name for p in DOCS.glob("*.md") if FENCE.search(p.read_text(encoding="utf-8"))}
    assert shown == set(HOW), "a doc with a ```sh block needs its entry in HOW"
    for name, how in HOW.items():
        assert doc_commands(name) == list(how), f"{name}: its commands and HOW differ"


def test_the_usage_commands_run_as_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(SAMPLE_VAULT, home / "Notes")
    (home / "Notes" / "Lawyer letters.md").write_text("# Lawyer letters\n\nPrivate.\n")
    shutil.copytree(DATA / "dendron-workspace", home / "dendron")
    tools = tmp_path / "bin"  # a person who has kms and Claude Code (`claude`) on PATH
    tools.mkdir()
    (tools / "claude").symlink_to(claude_bin())
    path = (Path(sys.executable).parent, tools)
    for command, how in HOW["usage.md"].items():
        if how != RUN:
            continue
        done = run_as_written(command, home, cwd=home, first=path)
        assert done.returncode == 0, f"{command!r} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stdout + done.stderr, command
    hidden = run_as_written("kms hidden --why", home, cwd=home).stdout
    assert "Lawyer letters" in hidden
