"""The real Claude Code in an interactive terminal: ``kms claude`` run inside a detached tmux session, against
the local Messages API stand-in (``fake_anthropic``), driven with ``send-keys`` and read with ``capture-pane``.

What it takes (measured with 2.1.332, see tests/support/claude_e2e.md for ``-p``): a ``~/.claude.json`` that
says onboarding is done, the working directory trusted and the dummy API key approved, else the first screens
ask; ``ENABLE_TOOL_SEARCH=false`` so the stand-in sees kms's tools in the first request; and the test waits
until the ``@kms:`` picker lists kms's notes before it types a prompt, since an interactive session does not
wait for its MCP servers before it takes input.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from support.claude_cli import REPO_ROOT, claude_bin, claude_env

PROMPT = "❯"


class Terminal:
    """One tmux session running ``kms claude``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def _tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name).stdout

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", self.name, "-l", text)

    def press(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    def wait_for(self, test: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        """The screen once ``test`` holds on it (polled every 0.2 s); fails with the screen after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if test(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")
            time.sleep(0.2)

    def press_until(self, key: str, test: Callable[[str], bool], what: str, tries: int = 3, each: float = 15.0) -> str:
        """Press ``key`` until ``test`` holds: a key pressed while a busy host is still drawing the focus it
        moved to can be dropped (only when nothing changed is it pressed again)."""
        for _ in range(tries - 1):
            self.press(key)
            try:
                return self.wait_for(test, what, each)
            except AssertionError:
                continue
        self.press(key)
        return self.wait_for(test, what, each)

    def connected(self, marker: str, timeout: float = 90.0) -> None:
        """Wait until the ``@kms:`` picker lists ``marker`` (kms's server is up), then clear the input."""
        self.wait_for(lambda s: PROMPT in s, "claude's prompt", timeout)
        deadline = time.monotonic() + timeout
        while True:
            self.type("@kms:")
            try:
                self.wait_for(lambda s: marker in s, "the kms picker", timeout=10)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
            finally:
                self.press("C-u")


def claude_home(home: Path, work: Path) -> None:
    """Claude Code's own state for a first interactive start without its onboarding screens."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "theme": "dark",
                "numStartups": 5,
                "projects": {str(work): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
                "customApiKeyResponses": {"approved": ["dummy"], "rejected": []},
            }
        )
    )


@contextmanager
def interactive_claude(
    base_url: str, tmp_path: Path, db_path: Path, kms_args: list[str], claude_args: list[str]
) -> Iterator[Terminal]:
    """``kms claude KMS_ARGS -- CLAUDE_ARGS`` in a fresh 160x50 tmux session; killed on the way out."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir(exist_ok=True)
    claude_home(home, work)
    env = claude_env(
        base_url,
        home,
        KMS_CLAUDE_BIN=str(claude_bin()),
        KMS_DB_PATH=str(db_path),
        KMS_CONFIG=str(tmp_path / "config.toml"),
        TERM="xterm-256color",
        ENABLE_TOOL_SEARCH="false",
    )
    env.pop("TMUX", None)
    command = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], sys.executable, "-m", "kmscli", "claude"]
    command += [*kms_args, "--", *claude_args]
    name = f"kms-e2e-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", str(work), shlex.join(command)],
        check=True,
        cwd=REPO_ROOT,
    )
    try:
        yield Terminal(name)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
