"""``kms demo --headless`` whose server really fails mid-story: killed (SIGKILL) or stalled (SIGSTOP) as
the agent's first write lands. The failed step is named as it happens and the text after it says the
story stopped; the demo exits 1 (it stalled at "agent creates a note in drafts/" and exited 0 before)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.host_harness import signal_death

CREATED = Path("vault") / "drafts" / "Auth errors - agent summary.md"


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "demo", "--headless", "--step-timeout", "5"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def is_kms_mcp(p: psutil.Process) -> bool:
    try:
        return p.cmdline()[-3:] == ["-m", "kmscli", "mcp"]
    except psutil.Error:  # gone, or a zombie the demo has not reaped yet
        return False


def server_after_first_write(demo: subprocess.Popen[str], tmp_path: Path) -> psutil.Process:
    """The demo's ``kms mcp`` once the story's first note is written (the story is past its reads)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert demo.poll() is None, "the demo ended before its first write"
        if any((w / CREATED).exists() for w in tmp_path.glob("kms-demo-*")):
            servers = [p for p in psutil.Process(demo.pid).children(recursive=True) if is_kms_mcp(p)]
            if servers:  # (the oldest: the story's own; on a loaded machine another may be starting beside it)
                return min(servers, key=lambda p: p.create_time())
        time.sleep(0.002)
    raise AssertionError("the demo's first write never landed")


def finish(demo: subprocess.Popen[str], server: psutil.Process) -> tuple[int, str, str]:
    try:
        out, err = demo.communicate(timeout=90)
    finally:
        if server.is_running():
            server.kill()  # a stopped server the demo could not end
    return demo.returncode, out, err


def lines_after_the_write(out: str) -> list[str]:
    """The story from its first write on (the note's file is there; its answer may not have come back)."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("▶ agent creates a note in drafts/"))
    return lines[first + 1 :]


def test_a_killed_server_is_a_failed_step_and_exit_1(demo: subprocess.Popen[str], tmp_path: Path) -> None:
    server = server_after_first_write(demo, tmp_path)
    server.send_signal(signal.SIGKILL)
    code, out, err = finish(demo, server)
    assert code == 1 and not signal_death(code), out + err
    after = lines_after_the_write(out)
    [failed] = [line for line in after if line.startswith("✗ step failed: ")]
    assert "the kms mcp server went away" in failed, out
    assert after[-1].startswith("the story stopped at a failed step; "), out
    assert "Traceback" not in err, err


def test_a_stalled_server_fails_its_step_at_the_deadline(demo: subprocess.Popen[str], tmp_path: Path) -> None:
    server = server_after_first_write(demo, tmp_path)
    server.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    code, out, err = finish(demo, server)
    assert code == 1 and not signal_death(code), out + err
    assert time.monotonic() - stopped_at >= 5  # the step's deadline, not an error, ended it
    after = lines_after_the_write(out)
    [failed] = [line for line in after if line.startswith("✗ step failed: ")]
    assert failed.endswith(": did not finish within 5 s"), out
    assert after[-1].startswith("the story stopped at a failed step; "), out
    assert "Traceback" not in err, err


def demo_server(tmp_path: Path) -> psutil.Process | None:
    """The ``kms mcp`` of the demo whose workspace is in ``tmp_path`` (found by the database it serves)."""
    for p in psutil.process_iter():
        try:
            if is_kms_mcp(p) and p.environ().get("KMS_DB_PATH", "").startswith(str(tmp_path)):
                return p
        except psutil.Error:
            continue
    return None


def test_the_dashboard_shows_the_failed_step_and_prints_it_after(tmp_path: Path) -> None:
    """The demo in its dashboard (a real terminal: tmux): the killed server's step shows as an error there,
    and once the person quits, in the story printed after it; the exit code is 1. (Before, the dashboard went
    on showing the last step as if the story were still running, and the demo exited 0.)"""
    import shlex
    import subprocess as sp
    import uuid

    from support.tmux_claude import Terminal

    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "TMPDIR": str(tmp_path), "TERM": "xterm-256color"}
    command = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], sys.executable, "-m", "kmscli", "demo"]
    command += ["--step-timeout", "5"]
    name = f"kms-demo-{uuid.uuid4().hex[:8]}"
    shell = shlex.join(command) + "; echo DEMO-EXIT=$?; sleep 300"
    sp.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50", shell], check=True)
    term = Terminal(name)
    server = None
    try:  # the story's steps are a second apart in the dashboard: the server is killed during its reads
        term.wait_for(lambda s: "Demo: the agent" in s, "the story's first step in the dashboard", timeout=120)
        server = demo_server(tmp_path)
        if server is not None:  # (else it is already gone: the step it left shows the same way)
            server.send_signal(signal.SIGKILL)
        term.wait_for(lambda s: "Demo: a step failed" in s, "the failed step in the dashboard", timeout=60)
        term.press("q")
        screen = term.wait_for(lambda s: "DEMO-EXIT=" in s, "the demo's exit", timeout=60)
        assert "DEMO-EXIT=1" in screen, screen
        printed = screen.splitlines()
        [failed] = [line for line in printed if line.startswith("✗ step failed: ")]
        assert "the kms mcp server went away" in failed, screen
    finally:
        sp.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
        if server is not None and server.is_running():
            server.kill()
