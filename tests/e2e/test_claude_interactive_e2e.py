"""The real Claude Code, interactive, in a terminal (tmux) against the Messages API stand-in (issue 27): the
``@kms:`` picker lists notes, a partial path completes through ``completion/complete``, the mentioned note's
text reaches the model; a staged write shows the host's own dialog, Enter applies it, Esc leaves it to the
dashboard. See tests/support/tmux_claude.py for what it takes to drive the interactive host."""

from __future__ import annotations

import json
import re
from pathlib import Path

import apsw
import pytest
from support.fake_anthropic import FakeAnthropic
from support.sql import value
from support.tmux_claude import interactive_claude
from support.vaults import note_id

from server.activity import approvals
from server.store.db import connect

pytestmark = pytest.mark.e2e
ALLOW = ["--allowedTools", "mcp__kms"]


def _sent(api: FakeAnthropic) -> str:
    return json.dumps([r.body for r in api.message_requests])


@pytest.mark.timeout(300)
def test_at_mention_picker_completion_and_the_notes_text(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    with (
        FakeAnthropic(tool_name="none_such_tool") as api,
        interactive_claude(api.base_url, tmp_path, db_path, [], ALLOW) as term,
    ):
        term.connected("kms:kms://sample/")  # the picker lists kms's notes (resources/list)
        term.type("@kms:kms://sample/hom")  # typed into the template: completion/complete on the path
        term.wait_for(lambda s: "◇ Home.md" in s, "the completed path")
        term.press("Tab")
        term.wait_for(lambda s: "@kms:kms://sample/Home.md" in s, "the mention")
        term.type(" what does this note say?")
        term.press("Enter")
        term.wait_for(lambda s: "Read MCP resource Home.md from kms" in s, "the host reading the note")
        term.wait_for(lambda s: "● OK" in s, "the model's answer")
        sent = _sent(api)
    body = value(indexed, "SELECT body FROM notes WHERE path = 'Home.md'")
    first_line = next(line for line in body.splitlines() if line.strip() and not line.startswith("#"))
    assert "Full contents of resource" in sent and json.dumps(first_line)[1:-1] in sent
    reads = indexed.execute(
        "SELECT n.path FROM note_reads r JOIN notes n ON n.id = r.note_id WHERE n.path = 'Home.md'"
    ).fetchall()
    assert reads, "the mention's read is recorded as the session's read"


def _staged_write(indexed: apsw.Connection, tmp_path: Path, content: str) -> tuple[FakeAnthropic, str]:
    (tmp_path / "config.toml").write_text('[agent]\nwrite = true\n\n[write]\napproval = "always"\n')
    nid = note_id(indexed, "Home")
    return FakeAnthropic(tool_name="mcp__kms__kms_append", tool_input={"noteId": nid, "content": content}), nid


@pytest.mark.timeout(300)
def test_a_staged_write_shows_the_hosts_dialog_and_enter_applies_it(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    fake, _ = _staged_write(indexed, tmp_path, "applied from the host's dialog")
    with fake as api, interactive_claude(api.base_url, tmp_path, db_path, ["--write"], ALLOW) as term:
        term.connected("kms:kms://sample/")
        term.type("add a line to my home note")
        term.press("Enter")
        dialog = term.wait_for(lambda s: "Accept" in s and "Decline" in s, "the host's dialog", timeout=90)
        assert "kms_append wants to change 1 note" in dialog and "sample:Home.md (+2 -0)" in dialog
        assert "Apply it" in dialog  # the default
        assert "applied from the host" not in (vault_dir / "Home.md").read_text()  # staged, not written
        # Claude Code's form: Enter moves from the decision to the reason, then to Accept, then submits
        term.press("Enter")
        term.wait_for(lambda s: re.search(r"❯\s+Reason", s) is not None, "the reason field", timeout=20)
        term.press("Enter")
        term.wait_for(lambda s: "❯ Accept" in s, "the Accept button", timeout=20)
        term.press_until("Enter", lambda s: "requests your input" not in s, "the dialog to close")
        term.wait_for(lambda s: "Tool said" in s, "the call's result", timeout=150)  # (the host retries the call)
    assert api.tool_results and not api.tool_results[-1].is_error, api.tool_results
    assert "applied from the host's dialog" in (vault_dir / "Home.md").read_text()
    done = approvals.list_pending(indexed, status=None)[0]
    assert (done.status, done.channel, done.outcome) == ("approved", "host", "applied")


@pytest.mark.timeout(300)
def test_esc_in_the_hosts_dialog_leaves_the_call_to_the_dashboard(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    fake, _ = _staged_write(indexed, tmp_path, "approved in the dashboard")
    with fake as api, interactive_claude(api.base_url, tmp_path, db_path, ["--write"], ALLOW) as term:
        term.connected("kms:kms://sample/")
        term.type("add a line to my home note")
        term.press("Enter")
        term.wait_for(lambda s: "Accept" in s and "Decline" in s, "the host's dialog", timeout=90)
        term.press("Escape")
        term.wait_for(lambda s: "waiting for the person to approve pending change" in s, "the call to wait")
        waiting = approvals.list_pending(indexed)
        assert len(waiting) == 1 and waiting[0].status == "pending"
        assert "approved in the dashboard" not in (vault_dir / "Home.md").read_text()
        conn = connect(db_path)
        try:
            approvals.decide(conn, waiting[0].id, approve=True, channel="dashboard")
        finally:
            conn.close()
        term.wait_for(lambda s: "Tool said" in s, "the call's result", timeout=150)  # (the host retries the call)
    assert api.tool_results and not api.tool_results[-1].is_error, api.tool_results
    assert "approved in the dashboard" in (vault_dir / "Home.md").read_text()
    done = approvals.list_pending(indexed, status=None)[0]
    assert (done.status, done.channel, done.outcome) == ("approved", "dashboard", "applied")
