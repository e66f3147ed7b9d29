"""The session note (issue 26): built from kms's own records, private, idempotent, skipped when empty,
written through the guard as the capture actor and taken back by ``kms revert``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from support.sql import value
from support.writes import Env, Writer, make_env

from server.activity import approvals, provenance, session_material
from server.activity.reads import ReadTracker
from server.activity.session_note import gather, render
from server.activity.session_registry import start_session
from server.config.session_contract import SessionConfig
from server.writes.capture import capture
from server.writes.review import decide_pending
from server.writes.undo.revert import revert


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = make_env(tmp_path)
    e.note("projects/alpha.md", "# Alpha\n\nThe alpha plan.\n")
    e.note("diary/secret.md", "---\nprivate: true\n---\n# Secret\n\nNever quote me.\n")
    return e


def config(env: Env, sid: str, **kw: Any) -> SessionConfig:
    base = SessionConfig(
        db_path=env.db_path,
        config_path=env.tmp / "config.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=False,  # the agent may not write: kms's own capture still may
        session_id=sid,
        watch=False,
    )
    return dataclasses.replace(base, **kw)


def read(env: Env, sid: str, *paths: str) -> None:
    tracker = ReadTracker(env.db_path, sid)
    ids = [value(env.conn, "SELECT id FROM notes WHERE path = ?", (p,)) for p in paths]
    tracker.record(ids)
    tracker.close()


def session_notes(env: Env) -> list[Path]:
    return sorted((env.root / "kms-sessions").glob("*.md")) if (env.root / "kms-sessions").is_dir() else []


def test_an_empty_session_gets_no_note_and_no_provenance_row(env: Env) -> None:
    start_session(env.conn, session_id="s1", kind="launcher", project="/work/p", now=1_700_000_000)
    answer = capture(config(env, "s1"), "SessionEnd")
    assert answer == {"written": False, "reason": "the session read, searched and wrote nothing"}
    assert session_notes(env) == []
    assert env.conn.execute("SELECT count(*) FROM tool_invocations").fetchall() == [(0,)]


def test_the_note_lists_reads_and_never_names_a_hidden_note(env: Env) -> None:
    start_session(env.conn, session_id="s1", kind="launcher", project="/work/p", now=1_700_000_000)
    read(env, "s1", "projects/alpha.md", "diary/secret.md")
    facts = gather(env.conn, "s1")
    assert [r["path"] for r in facts.reads] == ["projects/alpha.md"] and facts.hidden == 1
    text = render(facts)
    assert "- `projects/alpha.md`\n" in text
    assert "secret" not in text.lower() and "diary" not in text
    assert "1 note(s) hidden from agents" in text
    assert text.startswith('---\ntype: session\nsession: s1\nproject: "/work/p"\n')
    assert render(gather(env.conn, "s1")) == text  # deterministic


def test_capture_writes_one_note_updates_it_in_place_and_revert_takes_each_version_back(env: Env) -> None:
    start_session(env.conn, session_id="s1", kind="launcher", project="/work/p", now=1_700_000_000)
    writer = Writer(env.db_path, "s1")
    made = writer.create("Beta", "# Beta\n\nNew.\n", folder="projects")
    read(env, "s1", "projects/alpha.md")
    first = capture(config(env, "s1"), "PreCompact")
    assert first["written"] is True
    [note] = session_notes(env)
    text = note.read_text()
    assert f"created `projects/Beta.md` — revert: `kms revert {made['invocationId']}`" in text
    assert "kms-sessions" not in text.split("## Notes read")[1]  # the note never lists itself
    row = provenance.get_invocation(env.conn, first["invocationId"])
    assert row is not None and (row["actor"], row["tool"], row["change_kind"]) == (
        "capture",
        "session-note",
        "file-created",
    )
    assert env.conn.execute("SELECT total FROM write_counters WHERE session_id = 's1'").fetchall() == [(1,)]

    from server.activity.visits import changes_since

    mine = next(n for n in changes_since(env.conn, 0, None, 50)["notes"] if n["path"] == first["path"])
    assert mine["by"] == [{"agent": "s1", "project": "/work/p"}]  # kms wrote it for s1: not "the person"
    again = capture(config(env, "s1"), "PreCompact")  # nothing new: not written, no row
    assert again == {"written": False, "reason": "the session note is up to date"}

    session_material.record_event(env.conn, "s1", {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"})
    session_material.record_event(
        env.conn, "s1", {"hook_event_name": "Stop", "last_assistant_message": "Done: Beta is there."}
    )
    second = capture(config(env, "s1"), "SessionEnd")
    assert second["written"] is True and session_notes(env) == [note]  # the same note, rewritten
    updated = note.read_text()
    assert 'reason: "prompt_input_exit"' in updated and "```text\nDone: Beta is there.\n```" in updated

    assert revert(env.conn, second["invocationId"])["reverted"] == second["invocationId"]
    assert note.read_text() == text
    assert revert(env.conn, first["invocationId"])["reverted"] == first["invocationId"]
    assert session_notes(env) == []  # to the vault's trash, whence `kms trash restore` brings it back


def test_a_note_the_person_edited_is_left_alone(env: Env) -> None:
    start_session(env.conn, session_id="s1", kind="launcher", now=1_700_000_000)
    read(env, "s1", "projects/alpha.md")
    assert capture(config(env, "s1"), "PreCompact")["written"] is True
    [note] = session_notes(env)
    note.write_text(note.read_text() + "\nMy own words.\n")
    session_material.record_event(env.conn, "s1", {"hook_event_name": "SessionEnd", "reason": "other"})
    answer = capture(config(env, "s1"), "SessionEnd")
    assert answer == {"written": False, "reason": "the person changed the session note since kms wrote it"}
    assert note.read_text().endswith("My own words.\n")


def test_write_approval_stages_the_note_for_the_person(env: Env) -> None:
    start_session(env.conn, session_id="s1", kind="launcher", now=1_700_000_000)
    read(env, "s1", "projects/alpha.md")
    cfg = config(env, "s1", approval="always")
    answer = capture(cfg, "SessionEnd")
    assert answer["written"] is False and answer["pendingId"]
    assert session_notes(env) == []
    [pending] = approvals.list_pending(env.conn)
    assert pending.tool == "session-note" and pending.session_id == "s1"
    settled = decide_pending(env.conn, pending.id, True, channel="cli")["applied"]  # the decision writes it
    [note] = session_notes(env)
    assert settled["path"] == f"kms-sessions/{note.name}"
    row = provenance.get_invocation(env.conn, settled["invocationId"])
    assert row is not None and row["actor"] == "capture" and "approved by the person" in (row["message"] or "")


def test_a_staged_session_note_waits_for_the_person_past_the_agents_approval_timeout(env: Env) -> None:
    """It expired with write.approval_timeout, and the session's note was lost when nobody approved in time."""
    import time

    start_session(env.conn, session_id="s1", kind="launcher", now=1_700_000_000)
    read(env, "s1", "projects/alpha.md")
    cfg = config(env, "s1", approval="always", approval_timeout=1)
    pending_id = capture(cfg, "SessionEnd")["pendingId"]
    later = approvals.poll(env.conn, pending_id, now=time.time() + 3600)  # an hour on: still the person's to decide
    assert later.status == approvals.OPEN
    assert decide_pending(env.conn, pending_id, True, channel="cli")["applied"]["path"].startswith("kms-sessions/")


def test_a_hidden_capture_folder_is_refused(env: Env) -> None:
    start_session(env.conn, session_id="s1", kind="launcher", now=1_700_000_000)
    read(env, "s1", "projects/alpha.md")
    (env.root / ".kmsignore").write_text("kms-sessions/\n")
    with pytest.raises(Exception) as refused:
        capture(config(env, "s1"), "SessionEnd")
    assert getattr(refused.value, "kind", None) == "folder-denied"
    assert session_notes(env) == []


def test_files_changed_outside_kms_are_listed_and_queryable_by_path(env: Env, tmp_path: Path) -> None:
    start_session(env.conn, session_id="s1", kind="launcher", now=1_700_000_000)
    target = env.root / "projects" / "alpha.md"
    target.write_text("# Alpha\n\nEdited by the agent's own tool.\n")
    outside = tmp_path / "src" / "main.py"
    outside.parent.mkdir()
    outside.write_text("print(1)\n")
    for tool, path in (("Edit", target), ("Write", outside), ("Edit", env.root / "diary" / "secret.md")):
        event = {"hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": {"file_path": str(path)}}
        session_material.record_event(env.conn, "s1", event)
    session_material.record_event(env.conn, "s1", {"hook_event_name": "PostToolUse", "tool_name": "Bash"})
    [found] = session_material.files_for_path(env.conn, env.vault.id, "projects/alpha.md")
    assert (found.session_id, found.tool) == ("s1", "Edit") and found.hash_after is not None
    text = render(gather(env.conn, "s1"))
    section = text.split("## Files changed outside kms")[1]
    assert "- Edit: `projects/alpha.md`" in section and f"- Write: `{outside}`" in section
    assert "secret" not in text.lower()


def test_prompts_are_kept_only_when_the_setting_says_so(env: Env) -> None:
    start_session(env.conn, session_id="s1", kind="launcher", now=1_700_000_000)
    event = {"hook_event_name": "UserPromptSubmit", "prompt": "look at alpha"}
    session_material.record_event(env.conn, "s1", event)
    record = session_material.get(env.conn, "s1")
    assert record is not None and record.prompts == []
    session_material.record_event(env.conn, "s1", event, keep_prompts=True)
    read(env, "s1", "projects/alpha.md")
    assert "```text\nlook at alpha\n```" in render(gather(env.conn, "s1"))
    assert json.loads(value(env.conn, "SELECT prompts FROM session_records")) == ["look at alpha"]


def test_a_session_note_the_person_hid_or_took_back_is_never_written_again(env: Env) -> None:
    from server.index.notes import set_hidden

    start_session(env.conn, session_id="s1", kind="launcher", now=1_700_000_000)
    read(env, "s1", "projects/alpha.md")
    first = capture(config(env, "s1"), "PreCompact")
    [note] = session_notes(env)
    set_hidden(env.conn, first["noteId"], True)  # `kms hide`: agents may not see it any more
    session_material.record_event(env.conn, "s1", {"hook_event_name": "SessionEnd", "reason": "other"})
    answer = capture(config(env, "s1"), "SessionEnd")
    assert answer["written"] is False and "no longer where agents may see it" in answer["reason"]
    assert session_notes(env) == [note] and "reason:" not in note.read_text()  # neither rewritten nor a second


def test_quoted_host_text_adds_no_link_or_tag_to_the_session_note() -> None:
    """A last message naming [[alpha]] and #urgent made the session note a backlink of alpha and gave it the
    tag: host text is now a fenced block, read as said, parsed as nothing."""
    from server.activity.session_note import SessionFacts
    from server.vault.parser import parse_note

    facts = SessionFacts("s1", last_message="See [[alpha]] and #urgent ```not a fence``` too", prompts=["[[beta]]"])
    text = render(facts)
    parsed = parse_note(text, "Session")
    assert "[[alpha]]" in text and "#urgent" in text
    assert not parsed.links and "urgent" not in parsed.tags
