"""A session's undo restores the notes it changed outside kms (issue 28): its agent's own Edit/Write, reported
by its hooks and kept by the note history, listed in the same preview and restored in the same undo, each
through the write guard as the person (recorded, revertible); a note changed since the preview, or by someone
else after the session's edit, is refused (``conflict``) while the others are restored."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.outside import agent_tool, report_tool, someone_else
from support.sql import tuples
from support.writes import Env, Writer, make_env

from server.vault.files import sha256_hex
from server.writes.undo import undo_session
from server.writes.undo.revert import revert
from server.writes.undo.trash import list_trash

SID = "s-outside"
V1 = b"# Plan\r\n\r\nfirst line\r\nsecond line\r\n"  # CRLF kept byte for byte
V2 = V1 + b"third line, by the agent's Edit tool\r\n"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def test_an_edit_comes_back_byte_for_byte_through_the_preview_recorded_and_revertible(env: Env) -> None:
    env.note("plan.md", V1)
    agent_tool(env.conn, env.vault, SID, "plan.md", V2)
    plan = undo_session.preview(env.conn, SID)
    assert plan["revert"] == [] and plan["outsideSkip"] == []
    [item] = plan["outside"]
    assert item["kind"] == "outside edit reported by the session" and item["tool"] == "Edit"
    assert (item["path"], item["action"], item["version"]) == ("plan.md", "restore", 1)
    assert item["sizeChange"] == len(V1) - len(V2) and item["expect"] == sha256_hex(V2)
    done = undo_session.undo(env.conn, SID, shown=plan)
    assert (env.root / "plan.md").read_bytes() == V1
    [restored] = done["restored"]
    assert done["notRestored"] == [] and done["reverted"] == []
    [(tool, actor, summary)] = tuples(
        env.conn, "SELECT tool, actor, input_summary FROM tool_invocations WHERE id = ?", (restored["restoreId"],)
    )
    assert (tool, actor) == ("restore", "person") and f"undo of session {SID}" in summary
    revert(env.conn, restored["restoreId"])  # the restore is itself revertible
    assert (env.root / "plan.md").read_bytes() == V2
    # the note is now as someone else (the person's revert) left it: the session's undo leaves it alone
    again = undo_session.preview(env.conn, SID)
    assert again["outside"] == [] and "by person" in again["outsideSkip"][0]["reason"]


def test_a_note_the_session_created_goes_to_the_trash_and_one_it_deleted_comes_back(env: Env) -> None:
    env.note("keep.md", V1)
    agent_tool(env.conn, env.vault, SID, "new/idea.md", b"# Idea\n\nwritten by the agent\n", tool="Write")
    agent_tool(env.conn, env.vault, SID, "keep.md", V2)
    # then removed (within moments of its reported edit: the session's)
    agent_tool(env.conn, env.vault, SID, "keep.md", None)
    plan = undo_session.preview(env.conn, SID)
    actions = {i["path"]: i["action"] for i in plan["outside"]}
    assert actions == {"new/idea.md": "trash", "keep.md": "recreate"}, plan
    done = undo_session.undo(env.conn, SID, shown=plan)
    assert len(done["restored"]) == 2 and done["notRestored"] == []
    assert (env.root / "keep.md").read_bytes() == V1
    assert not (env.root / "new" / "idea.md").exists()
    assert [t.path for t in list_trash(env.conn)] == ["new/idea.md"]  # kms's trash: never lost
    assert (env.root / ".trash" / "new" / "idea.md").read_bytes() == b"# Idea\n\nwritten by the agent\n"


def test_a_note_changed_since_the_preview_or_after_the_session_is_refused_and_the_others_restored(
    env: Env,
) -> None:
    for name in ("a.md", "b.md", "c.md"):
        env.note(name, V1)
        # reported long before: told by its bytes
        agent_tool(env.conn, env.vault, SID, name, V2 + name.encode(), at=time.time() - 100)
    someone_else(env.conn, env.vault, "c.md", V2 + b"the person's own line\n")  # after the session's edit
    plan = undo_session.preview(env.conn, SID)
    assert sorted(i["path"] for i in plan["outside"]) == ["a.md", "b.md"]
    [late] = plan["outsideSkip"]
    assert late["path"] == "c.md" and late["errorKind"] == "conflict" and "after the session's edit" in late["reason"]
    someone_else(env.conn, env.vault, "b.md", b"saved after the preview\n")
    done = undo_session.undo(env.conn, SID, shown=plan)
    assert [i["path"] for i in done["restored"]] == ["a.md"]
    refused = {i["path"]: i for i in done["notRestored"]}
    assert set(refused) == {"b.md", "c.md"} and refused["b.md"]["errorKind"] == "conflict"
    assert "changed since the preview" in refused["b.md"]["reason"]
    assert (env.root / "a.md").read_bytes() == V1
    assert (env.root / "b.md").read_bytes() == b"saved after the preview\n"
    assert (env.root / "c.md").read_bytes() == V2 + b"the person's own line\n"


def test_the_sessions_kms_calls_on_that_note_are_covered_or_reverted_and_the_note_comes_back_whole(
    env: Env,
) -> None:
    plan_id = env.note("plan.md", V1)
    other_id = env.note("other.md", b"# Other\n")
    writer = Writer(env.db_path, SID)
    before = writer.append(plan_id, "kms line before the outside edit")
    agent_tool(env.conn, env.vault, SID, "plan.md", (env.root / "plan.md").read_bytes() + b"outside line\r\n")
    after = writer.append(plan_id, "kms line after the outside edit")
    writer.append(other_id, "kms line elsewhere")
    plan = undo_session.preview(env.conn, SID)
    [item] = plan["outside"]
    assert [c["invocationId"] for c in item["covers"]] == [after["invocationId"]]
    listed = [i["invocationId"] for i in plan["revert"]]
    assert before["invocationId"] in listed and after["invocationId"] not in listed and len(listed) == 2
    done = undo_session.undo(env.conn, SID, shown=plan)
    assert done["skipped"] == [] and done["notRestored"] == [] and len(done["reverted"]) == 2
    assert (env.root / "plan.md").read_bytes() == V1
    assert (env.root / "other.md").read_bytes() == b"# Other\n"


def test_a_save_the_watcher_missed_is_indexed_then_restored_and_since_limits_it(env: Env) -> None:
    env.note("plan.md", V1)
    (env.root / "plan.md").write_bytes(V2)  # no watcher ran: kms has only seen V1
    report_tool(env.conn, SID, env.root / "plan.md")
    assert undo_session.preview(env.conn, SID, since=time.time() + 3600)["outside"] == []
    [item] = undo_session.preview(env.conn, SID)["outside"]
    assert item["version"] == 1
    undo_session.undo(env.conn, SID)
    assert (env.root / "plan.md").read_bytes() == V1


def test_an_unknown_session_is_not_found(env: Env) -> None:
    from server.errors import KmsError

    with pytest.raises(KmsError) as e:
        undo_session.preview(env.conn, "no-such-session")
    assert e.value.kind == "not-found"
