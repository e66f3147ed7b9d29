"""`kms demo --headless`: the zero-setup story runs against a real `kms mcp` process and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_headless_demo_tells_the_whole_story(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "kmscli", "demo", "--headless", "--keep"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for step in (
        "agent orients itself",
        "may: read, write",
        "vault sample (obsidian)",
        "agent searches",
        "agent reads the best hit",
        "hidden notes never reach an agent",
        "created drafts/Auth errors - agent summary.md",
        "appended",
        "frontmatter updated",
        "folder-denied",
        "rate-limited",
    ):
        assert step in out, f"missing {step!r} in:\n{out}"
    assert "0 hits: hidden notes never reach an agent" in out
    assert "ERROR" not in proc.stderr  # no model download attempts or tracebacks
    # everything happened in a private copy: the packaged sample vault is untouched
    workspace = next(tmp_path.glob("kms-demo-*"))
    assert f"demo workspace kept: {workspace}" in " ".join(out.split())
    created = Path("drafts") / "Auth errors - agent summary.md"
    assert (workspace / "vault" / created).exists()
    assert not (Path(__file__).parents[2] / "kmscli" / "sample_vault" / created).exists()


def test_the_demo_removes_its_workspace_on_exit(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "kmscli", "demo", "--headless"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(tmp_path.glob("kms-demo-*")) and "kept" not in proc.stdout
