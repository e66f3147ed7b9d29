"""End to end with the REAL Claude Code through ``kms claude`` (issue 26): the session's private settings file
carries kms's hooks; the first request carries the start brief; the other events reach kms with the
launcher's session (over HTTP to the service, or through ``kms hook`` with ``--stdio``); the session note
appears, lists what the session read and changed (an Edit-tool change outside kms too) and ``kms revert``
takes it back; the Stop rule gives exactly one extra turn. The Messages API is the local stand-in.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from support.claude_cli import claude_bin, claude_env, run_headless, stream_events
from support.fake_anthropic import ScriptedAnthropic
from support.sql import tuples

from server.activity import session_material
from server.activity.start import START_BUDGET_TOKENS
from server.index.records import estimate_tokens
from server.writes.hook_events import ASK_REASON

pytestmark = pytest.mark.e2e

BRIEF_HEAD = "kms gives this session the person's Markdown notes"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kms_claude(
    env: dict[str, str], work: Path, prompts: list[str], *extra: str, allowed: str = "mcp__kms,Read,Edit"
) -> subprocess.CompletedProcess[str]:
    """``kms claude`` with one turn per prompt in one Claude Code process (stream-json input: a later
    prompt may be a slash command such as ``/compact``)."""
    args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    lines = [json.dumps({"type": "user", "message": {"role": "user", "content": p}}) for p in prompts]
    return subprocess.run(
        [sys.executable, "-m", "kmscli", "claude", *extra, "--", *args, "--allowedTools", allowed],
        env=env,
        cwd=work,
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=200,
    )


def last_user_text(body: dict) -> str:
    messages = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return json.dumps(messages[-1].get("content")) if messages else ""


def brief_in(request_body: dict) -> str | None:
    """The brief's text as the request carries it (a system reminder in the first user message)."""
    for message in request_body.get("messages") or []:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for b in blocks:
            text = b.get("text") if isinstance(b, dict) else None
            if isinstance(text, str) and BRIEF_HEAD in text:
                text = text[text.index(BRIEF_HEAD) :]
                opening = text.index("json\n")
                fence = text[:opening].rsplit("\n", 1)[-1]
                return text[: text.index("\n" + fence + "\n", opening) + len(fence) + 2]
    return None


@pytest.mark.timeout(300)
@pytest.mark.parametrize("transport", ["service", "stdio"])
def test_a_session_gets_its_brief_and_leaves_one_revertible_note(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path, transport: str
) -> None:
    claude = claude_bin()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    outside = vault_dir / "inbox" / "Quick capture.md"
    old_line = outside.read_text().splitlines()[-1]
    script = [
        ("mcp__kms__kms_search", {"query": "auth error handling"}),
        ("mcp__kms__kms_read", {"noteId": "Auth service error handling"}),  # a search's hits are not reads
        ("mcp__kms__kms_create", {"title": "Decision log", "content": "We retry twice.\n", "folder": "projects"}),
        ("Read", {"file_path": str(outside)}),  # the host's Edit edits only a file it has read
        ("Edit", {"file_path": str(outside), "old_string": old_line, "new_string": old_line + " (edited)"}),
    ]
    (tmp_path / "config.toml").write_text("[capture]\nask_agent = 1\nprompts = true\n")
    with ScriptedAnthropic(script=script, final="All done here.") as api:
        env = claude_env(
            api.base_url,
            home,
            KMS_CLAUDE_BIN=str(claude),
            KMS_DB_PATH=str(db_path),
            KMS_CONFIG=str(tmp_path / "config.toml"),
            KMS_SERVICE_USE="1" if transport == "service" else "0",
            KMS_SERVICE_PORT=str(free_port()),
            ENABLE_TOOL_SEARCH="false",
        )
        try:
            proc = kms_claude(env, work, ["Look at my auth notes and log the decision", "/compact"], "--write")
        finally:
            if transport == "service":
                subprocess.run(
                    [sys.executable, "-m", "kmscli", "service", "stop"], env=env, capture_output=True, timeout=60
                )
    debug = f"rc={proc.returncode}\n{api.describe()}\nstderr:\n{proc.stderr[-3000:]}\nstdout:\n{proc.stdout[-2000:]}"
    assert proc.returncode == 0, debug
    main = [r for r in api.message_requests if r.body.get("tools")]

    brief = brief_in(main[0].body)  # the start brief, in the very first request, within kms_start's budget
    assert brief is not None, debug
    assert estimate_tokens(len(brief.encode())) <= START_BUDGET_TOKENS
    assert '"name": "sample"' in brief and brief.endswith("```\n")

    # the Stop rule: exactly one extra turn, carrying kms's reason; the second Stop is let through
    asked = [r for r in main if ASK_REASON.split(":")[0] in last_user_text(r.body)]
    assert len(asked) == 1 and main.index(asked[0]) == len(script) + 1, debug

    [(sid,)] = tuples(indexed, "SELECT id FROM sessions WHERE kind = 'launcher'")
    record = session_material.get(indexed, sid)
    assert record is not None, debug
    result = next(e for e in stream_events(proc.stdout) if e.get("type") == "result")
    assert record.host_session == result["session_id"]  # the host's events reached the launcher's session
    assert record.prompts[0] == "Look at my auth notes and log the decision"  # UserPromptSubmit (capture.prompts)
    assert record.last_message == "All done here." and record.end_reason and record.ended_at  # Stop, SessionEnd
    assert record.asked_at is not None and record.compact_summary  # PostCompact

    notes = sorted((vault_dir / "kms-sessions").glob("*.md"))
    assert len(notes) == 1, debug
    text = notes[0].read_text()
    assert text.startswith(f"---\ntype: session\nsession: {sid}\n")
    assert "- created `projects/Decision log.md` — revert: `kms revert " in text
    assert "- Edit: `inbox/Quick capture.md`" in text, [r.text for r in api.tool_results]  # outside kms
    assert "`projects/Auth service error handling.md`" in text.split("## Notes read")[1]
    assert "- `auth error handling` (kms_search)" in text
    assert "```text\nAll done here.\n```" in text and "## Summary at compaction" in text

    rows = indexed.execute(
        "SELECT id FROM tool_invocations WHERE session_id = ? AND actor = 'capture' AND status = 'success' "
        "ORDER BY id DESC",
        (sid,),
    ).fetchall()
    assert len(rows) == 2, debug  # written at /compact (PreCompact), updated at the end (SessionEnd)
    for (rid,) in rows:  # newest first: each version back, the first one to the trash
        undo = subprocess.run(
            [sys.executable, "-m", "kmscli", "revert", str(rid), "--yes"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert undo.returncode == 0, undo.stderr
    assert not list((vault_dir / "kms-sessions").glob("*.md"))


@pytest.mark.timeout(240)
def test_the_exported_plugin_loads_with_its_tools_and_its_brief(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from support.fake_anthropic import FakeAnthropic

    claude = claude_bin()
    home, work, plugin = tmp_path / "home", tmp_path / "work", tmp_path / "plugin"
    home.mkdir()
    work.mkdir()
    made = subprocess.run(
        [sys.executable, "-m", "kmscli", "plugin", "export", "claude-code", str(plugin)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    tool = "mcp__plugin_kms_kms__kms_search"  # Claude Code's name for a plugin's MCP tool
    with FakeAnthropic(tool_name=tool, query="auth error handling") as api:
        env = claude_env(api.base_url, home, ENABLE_TOOL_SEARCH="false")
        args = ["--plugin-dir", str(plugin), "-p", "Find my auth notes", "--allowedTools", "mcp__plugin_kms_kms"]
        proc = run_headless([str(claude), *args, "--output-format", "stream-json", "--verbose"], env=env, cwd=work)
    debug = f"rc={proc.returncode}\n{api.describe()}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, debug
    init = next(e for e in stream_events(proc.stdout) if e.get("subtype") == "init")
    assert {"name": "plugin:kms:kms", "status": "connected"}.items() <= init["mcp_servers"][0].items(), debug
    listed = {t for t in init["tools"] if t.startswith("mcp__plugin_kms_kms__")}
    assert {"mcp__plugin_kms_kms__kms_start", tool} <= listed, debug
    assert api.tool_results and "Auth service error handling" in api.tool_results[-1].text, debug
    assert brief_in(api.message_requests[0].body) is not None, debug  # the plugin's SessionStart hook


@pytest.mark.timeout(240)
def test_a_bare_session_runs_no_hook_and_leaves_no_note(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    """``claude --bare`` runs no hook: no brief, no record, no note, and nothing fails (a plain session beside
    it, from the same launcher, shows the hooks are there)."""
    from support.fake_anthropic import FakeAnthropic

    claude = claude_bin()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    runs = {}
    for kind, extra in (("plain", ()), ("bare", ("--bare",))):
        with FakeAnthropic(query="auth error handling") as api:
            env = claude_env(
                api.base_url,
                home,
                KMS_CLAUDE_BIN=str(claude),
                KMS_DB_PATH=str(db_path),
                KMS_CONFIG=str(tmp_path / "config.toml"),
                ENABLE_TOOL_SEARCH="false",
            )
            args = [*extra, "-p", "Find my auth notes", "--allowedTools", "mcp__kms", "--output-format", "json"]
            proc = run_headless(
                [sys.executable, "-m", "kmscli", "claude", "--stdio", "--", *args],
                env=env,
                cwd=work,
            )
            runs[kind] = (proc, api.message_requests, api.tool_results)
    for kind, (proc, _requests, results) in runs.items():
        assert proc.returncode == 0 and results, f"{kind}: {proc.stderr[-3000:]}"
    assert brief_in(runs["plain"][1][0].body) is not None
    assert all(BRIEF_HEAD not in json.dumps(r.body) for r in runs["bare"][1])
    plain, bare = [r[0] for r in indexed.execute("SELECT id FROM sessions WHERE kind = 'launcher' ORDER BY started_at")]
    assert session_material.get(indexed, plain) is not None and session_material.get(indexed, bare) is None
    [note] = (vault_dir / "kms-sessions").glob("*.md")  # the plain session's note only
    assert f"session: {plain}\n" in note.read_text()
