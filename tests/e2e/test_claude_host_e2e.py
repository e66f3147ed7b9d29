"""The host side of issue 27 with the REAL Claude Code CLI against the local Messages API stand-in: a kms
prompt run as a slash command in print mode (its text, with the vault's data, reaches the model as the
person's message)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.claude_cli import claude_bin, claude_env, claude_print_args, run_headless, stream_events
from support.fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.e2e


def user_texts(body: Any) -> str:
    """Every text the person's messages of a Messages request carry."""
    out = []
    for message in (body or {}).get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(out)


@pytest.mark.timeout(240)
def test_print_mode_runs_the_recall_prompt_as_a_slash_command(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    claude = claude_bin()
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    with FakeAnthropic(tool_name="none_such_tool") as api:  # the model only answers text
        env = claude_env(
            api.base_url,
            home,
            KMS_CLAUDE_BIN=str(claude),
            KMS_DB_PATH=str(db_path),
            KMS_CONFIG=str(tmp_path / "config.toml"),
        )
        proc = run_headless(
            [sys.executable, "-m", "kmscli", "claude", "--", *claude_print_args("/mcp__kms__recall auth errors")],
            env=env,
            cwd=work,
        )
    debug = f"rc={proc.returncode}\n{api.describe()}\nstderr:\n{proc.stderr[-3000:]}\nstdout:\n{proc.stdout[-3000:]}"
    assert proc.returncode == 0, debug
    init = next(
        e for e in stream_events(proc.stdout) if e.get("subtype") == "init"
    )  # (hooks answer as system events first)
    assert {"name": "kms", "status": "connected"}.items() <= init["mcp_servers"][0].items(), debug
    sent = "\n".join(user_texts(r.body) for r in api.message_requests)
    assert "say about 'auth errors'" in sent, debug + "\n" + sent[-2000:]  # every word: Claude Code splits them
    assert "Auth service error handling" in sent, debug + "\n" + json.dumps(sent[-3000:])
