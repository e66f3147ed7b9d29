"""The commands the README shows, read out of it, and the environment a newcomer runs them in.

A command is a line of a ```sh block, or an inline code span that starts with ``kms `` and is a whole command
(not a pattern such as ``kms service start|status|stop``). The README tests run each one as written, in a
shell, as a newcomer would: a fresh HOME, no ``KMS_*`` variable, ``kms`` on PATH."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.claude_cli import REPO_ROOT
from support.tmux_claude import Terminal

README = REPO_ROOT / "README.md"
FENCE = re.compile(r"```sh\n(.*?)```", re.S)
INLINE = re.compile(r"`(kms [^`|]+)`")
PLACEHOLDER = re.compile(r"\b[A-Z]{2,}\b")  # HOST, NOTE: a form to fill in, not a command


def readme_commands(text: str | None = None) -> list[str]:
    """Every command the README shows, in the order it shows them, each once."""
    text = README.read_text() if text is None else text
    found: list[str] = []
    for block in FENCE.findall(text):
        found += [line.strip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    outside = FENCE.sub("", text)
    found += [c for c in INLINE.findall(outside) if not PLACEHOLDER.search(c) and c.split()[-1] != "kms"]
    return list(dict.fromkeys(found))


def newcomer_env(home: Path, *, first: tuple[Path, ...] | None = None, **extra: str) -> dict[str, str]:
    """A person's shell: their own HOME, no ``KMS_*`` or ``XDG_*``; on PATH ``first`` (default: the suite's
    installed ``kms``), then the real Python's own folder (a pyenv shim would look for ``~/.pyenv`` in the new
    HOME), then the caller's PATH."""
    first = (Path(sys.executable).parent,) if first is None else first
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("KMS_", "XDG_", "PYTEST", "COLUMNS"))}
    path = [*map(str, first), str(Path(sys.base_prefix) / "bin"), os.environ.get("PATH", "/usr/bin:/bin")]
    return {**keep, "HOME": str(home), "PATH": ":".join(path), **extra}


def run_as_written(
    command: str, home: Path, cwd: Path, timeout: float = 300, first: tuple[Path, ...] | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` exactly as the README writes it, in bash (its comments, quotes and globs too)."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=newcomer_env(home, first=first),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


class ShellTerminal(Terminal):
    """A tmux terminal whose command's exit code is written to ``exit_file`` when it ends."""

    def __init__(self, name: str, exit_file: Path) -> None:
        super().__init__(name)
        self.exit_file = exit_file

    def exit_code(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while not self.exit_file.exists() or not self.exit_file.read_text().strip():
            if time.monotonic() > deadline:
                raise AssertionError(f"the command did not end; the screen:\n{self.screen()}")
            time.sleep(0.2)
        return int(self.exit_file.read_text())


@contextmanager
def in_terminal(command: str, home: Path, cwd: Path, first: tuple[Path, ...] | None = None) -> Iterator[ShellTerminal]:
    """``command`` in a detached 120x40 tmux terminal (for what needs one: the dashboard); killed after."""
    env = newcomer_env(home, first=first, TERM="xterm-256color")
    env.pop("TMUX", None)
    name = f"kms-readme-{uuid.uuid4().hex[:8]}"
    marker = cwd / f".{name}.exit"
    shell = f"{command}\necho $? > {shlex.quote(str(marker))}\nsleep 600"  # a line apart: the README's comment
    wrapped = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "-c", shell]
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40", "-c", str(cwd), shlex.join(wrapped)],
        check=True,
    )
    terminal = ShellTerminal(name, marker)
    try:
        yield terminal
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)


def checkout_copy(dest: Path) -> Path:
    """The repository's files as a fresh clone has them (tracked and new, never ignored: no .venv, no
    caches), copied to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest
