"""Staging a call for approval through the one guard: every write tier shows its exact per-file diff and
writes nothing; once approved exactly that lands; a changed note is a conflict; decisions are recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import apsw
import pytest
from support.organize import index, make_vault, vault_bytes
from support.writes import write_service

from server.activity import approvals, control
from server.activity.session_registry import start_session
from server.errors import KmsError
from server.mcp.tools import REGISTRY
from server.mcp.tools.base import WriteSpec
from server.writes.guard import WriteService
from server.writes.undo.undo_session import preview, undo

SPECS: dict[str, WriteSpec[Any]] = {s.name: s for s in REGISTRY if isinstance(s, WriteSpec)}  # the guard takes these
SID = "s00000000a11c"


@pytest.fixture
def root(tmp_path: Path, conn: apsw.Connection) -> Path:
    return index(conn, make_vault(tmp_path / "v")).root


def service(db_path: Path, **kw: Any) -> WriteService:
    kw.pop("tier_enabled", None)  # (every tier is on in these tests)
    return write_service(db_path, SID, None, kw.pop("allowlist", None), vault="v", **kw)


def nid(conn: apsw.Connection, path: str) -> str:
    return cast(str, conn.execute("SELECT id FROM notes WHERE path = ?", (path,)).fetchall()[0][0])


def approve_and_settle(conn: apsw.Connection, writes: WriteService, tool: str, args: dict[str, Any]) -> dict:
    staged = writes.stage(SPECS[tool], args)
    assert staged is not None
    approvals.decide(conn, staged.id, approve=True)
    decision = writes.decision(staged)
    assert decision is not None
    return writes.settle(SPECS[tool], args, staged, decision)


@pytest.mark.parametrize(
    "tool,args,files",
    [
        ("kms_create", {"title": "New", "folder": "drafts", "content": "hello"}, ["drafts/New.md"]),
        ("kms_append", {"noteId": "drafts/Draft.md", "content": "more"}, ["drafts/Draft.md"]),
        (
            "kms_rename",
            {"noteId": "notes/Target.md", "title": "Goal"},
            ["notes/Target.md", "Linker.md", "Crlf.md", "private/Secret.md"],
        ),
        ("kms_move", {"noteId": "drafts/Draft.md", "folder": "notes"}, ["drafts/Draft.md"]),
        ("kms_trash", {"noteId": "Other.md"}, ["Other.md"]),
        ("kms_rename_folder", {"folder": "notes", "name": "goals"}, ["notes/Target.md", "Linker.md", "Crlf.md"]),
        (
            "kms_create_many",
            {"notes": [{"title": "A1", "folder": "drafts"}, {"title": "A2", "folder": "drafts"}]},
            ["drafts/A1.md", "drafts/A2.md"],
        ),
    ],
)
def test_every_tier_stages_its_exact_files_and_writes_nothing(
    root: Path, conn: apsw.Connection, db_path: Path, tool: str, args: dict[str, Any], files: list[str]
) -> None:
    writes = service(db_path, approval="always", tier_enabled=lambda _t: True)
    if "noteId" in args:
        args = {**args, "noteId": nid(conn, args["noteId"])}
    before = vault_bytes(root)
    staged = writes.stage(SPECS[tool], args)
    assert staged is not None
    assert sorted(f.path for f in staged.files) == sorted(files)
    assert vault_bytes(root) == before  # nothing written, no folder made
    assert conn.execute("SELECT count(*) FROM tool_invocations").fetchall()[0][0] == 0  # no row yet
    row = approvals.get(conn, staged.id)
    assert row is not None and row.status == "pending" and row.tool == tool
    approvals.decide(conn, staged.id, approve=True, reason=None)
    decision = writes.decision(staged)
    assert decision is not None
    result = writes.settle(SPECS[tool], args, staged, decision)
    assert result.get("changed", True)
    after = vault_bytes(root)
    assert after != before
    statuses = conn.execute("SELECT tool, actor, status FROM tool_invocations ORDER BY id").fetchall()
    assert statuses == [("approve", "person", "success"), (tool, "agent", "success")]


def test_approved_edit_lands_byte_identical_to_the_diff_shown(root: Path, conn: apsw.Connection, db_path: Path) -> None:
    writes = service(db_path, approval="always", tier_enabled=lambda _t: True)
    note = nid(conn, "drafts/Draft.md")
    version = writes.conn().execute("SELECT content_hash FROM notes WHERE id = ?", (note,)).fetchall()[0][0]
    args = {"noteId": note, "version": version, "edits": [{"replace": {"old": "first line", "new": "1st line"}}]}
    staged = writes.stage(SPECS["kms_edit"], args)
    assert staged is not None and staged.files[0].added == 1 and staged.files[0].removed == 1
    assert "-first line" in staged.files[0].diff and "+1st line" in staged.files[0].diff
    approvals.decide(conn, staged.id, approve=True)
    decision = writes.decision(staged)
    assert decision is not None
    writes.settle(SPECS["kms_edit"], args, staged, decision)
    import hashlib

    assert hashlib.sha256((root / "drafts/Draft.md").read_bytes()).hexdigest() == staged.files[0].hash_after


def test_a_linking_note_changed_meanwhile_is_a_conflict_and_nothing_moves(
    root: Path, conn: apsw.Connection, db_path: Path
) -> None:
    writes = service(db_path, approval="always", tier_enabled=lambda _t: True)
    args = {"noteId": nid(conn, "notes/Target.md"), "title": "Goal"}
    staged = writes.stage(SPECS["kms_rename"], args)
    assert staged is not None
    (root / "Linker.md").write_text((root / "Linker.md").read_text() + "\nthe person's line\n")
    before = vault_bytes(root)
    approvals.decide(conn, staged.id, approve=True)
    decision = writes.decision(staged)
    assert decision is not None
    with pytest.raises(KmsError) as e:
        writes.settle(SPECS["kms_rename"], args, staged, decision)
    assert e.value.kind == "conflict"
    assert vault_bytes(root) == before
    done = approvals.get(conn, staged.id)
    assert done is not None and done.outcome == "conflict"


def test_bulk_threshold_and_off(root: Path, conn: apsw.Connection, db_path: Path) -> None:
    note = nid(conn, "drafts/Draft.md")
    bulk = service(db_path, approval="bulk", approval_lines=3)
    assert bulk.stage(SPECS["kms_append"], {"noteId": note, "content": "one\ntwo"}) is None
    assert bulk.stage(SPECS["kms_append"], {"noteId": note, "content": "1\n2\n3\n4\n5"}) is not None
    assert service(db_path).stage(SPECS["kms_append"], {"noteId": note, "content": "x\n" * 50}) is None
    with pytest.raises(ValueError):
        service(db_path, approval="sometimes")


def test_refusals_before_staging_are_recorded_and_never_run(root: Path, conn: apsw.Connection, db_path: Path) -> None:
    writes = service(db_path, approval="always", allowlist=["drafts"])
    before = vault_bytes(root)
    with pytest.raises(KmsError) as e:
        writes.stage(SPECS["kms_create"], {"title": "X", "folder": "notes"})
    assert e.value.kind == "folder-denied"
    with pytest.raises(KmsError) as e:
        writes.stage(SPECS["kms_append"], {"noteId": nid(conn, "drafts/Draft.md"), "bogus": 1})
    assert e.value.kind == "invalid-input"
    assert vault_bytes(root) == before and approvals.count_open(conn) == 0
    rows = conn.execute("SELECT error FROM tool_invocations ORDER BY id").fetchall()
    assert rows == [("folder-denied",), ("invalid-input",)]


def test_decisions_refuse_twice_and_unknown(root: Path, conn: apsw.Connection, db_path: Path) -> None:
    writes = service(db_path, approval="always", clock=lambda: 100.0, approval_timeout=10)
    staged = writes.stage(SPECS["kms_append"], {"noteId": nid(conn, "drafts/Draft.md"), "content": "x"})
    assert staged is not None
    with pytest.raises(KmsError) as e:
        approvals.decide(conn, 999, approve=True)
    assert e.value.kind == "not-found"
    with pytest.raises(KmsError) as e:  # past its time: no decision lands
        approvals.decide(conn, staged.id, approve=True, now=111.0)
    assert e.value.kind == "conflict"
    decided = approvals.decide(conn, staged.id, approve=False, reason="  no  ", now=101.0, channel="web")
    with pytest.raises(KmsError):
        approvals.decide(conn, staged.id, approve=True, now=102.0)
    row = approvals.get(conn, staged.id)
    assert row is not None and row.status == "rejected" and row.reason == "no"
    assert decided == row  # the decision's answer is the row as stored (built without reading it again)
    assert approvals.head(conn, staged.id) == ("kms_append", "rejected", False) and approvals.head(conn, 999) is None


def test_revoke_rejects_waiting_calls(root: Path, conn: apsw.Connection, db_path: Path) -> None:
    start_session(conn, kind="server", session_id=SID)
    writes = service(db_path, approval="always")
    staged = writes.stage(SPECS["kms_append"], {"noteId": nid(conn, "drafts/Draft.md"), "content": "x"})
    assert staged is not None
    control.set_state(conn, SID, "revoked")
    decision = writes.decision(staged)
    assert decision is not None and decision.status == "rejected" and "revoked" in (decision.reason or "")


def test_undo_two_edits_of_one_note_comes_back_byte_for_byte(root: Path, conn: apsw.Connection, db_path: Path) -> None:
    start_session(conn, kind="server", session_id=SID)
    writes = service(db_path, tier_enabled=lambda _t: True)
    before = vault_bytes(root)
    note = nid(conn, "drafts/Draft.md")
    for old, new in (("first line", "1st line"), ("second line", "2nd line")):
        version = conn.execute("SELECT content_hash FROM notes WHERE id = ?", (note,)).fetchall()[0][0]
        writes.call(
            SPECS["kms_edit"], {"noteId": note, "version": version, "edits": [{"replace": {"old": old, "new": new}}]}
        )
    writes.call(SPECS["kms_rename"], {"noteId": nid(conn, "notes/Target.md"), "title": "Goal"})
    plan = preview(conn, SID)
    assert len(plan["revert"]) == 3 and not plan["skip"]
    done = undo(conn, SID)
    assert len(done["reverted"]) == 3 and not done["skipped"]
    assert vault_bytes(root) == before
    assert preview(conn, SID)["revert"] == []  # nothing left to undo


def test_undo_since_takes_back_only_the_later_changes(root: Path, conn: apsw.Connection, db_path: Path) -> None:
    from server.writes.undo.undo_session import parse_since

    start_session(conn, kind="server", session_id=SID)
    writes = service(db_path)
    note = nid(conn, "drafts/Draft.md")
    writes.call(SPECS["kms_append"], {"noteId": note, "content": "early"})
    after_early = (root / "drafts/Draft.md").read_bytes()
    conn.execute("UPDATE tool_invocations SET at = 1000.0")
    writes.call(SPECS["kms_append"], {"noteId": note, "content": "late"})
    conn.execute("UPDATE tool_invocations SET at = 5000.0 WHERE at != 1000.0")
    assert parse_since("30m", now=7000.0) == 7000.0 - 1800
    assert parse_since(None) is None
    with pytest.raises(KmsError) as e:
        parse_since("yesterday-ish")
    assert e.value.kind == "invalid-input"
    done = undo(conn, SID, since=parse_since("1h", now=7000.0))
    assert len(done["reverted"]) == 1 and (root / "drafts/Draft.md").read_bytes() == after_early
    with pytest.raises(KmsError) as e:
        preview(conn, "s-nobody")
    assert e.value.kind == "not-found"


def test_a_folder_move_over_the_file_limit_is_staged_for_the_person_not_refused(
    root: Path, conn: apsw.Connection, db_path: Path
) -> None:
    """write.max_files_per_call refuses an unapproved folder move; with write.approval on, the person is shown
    every file of it instead, and exactly that lands once approved."""
    args = {"folder": "notes", "name": "goals"}
    before = vault_bytes(root)
    with pytest.raises(KmsError) as refused:
        service(db_path, max_files=2).call(SPECS["kms_rename_folder"], args)
    assert refused.value.kind == "too-broad" and vault_bytes(root) == before
    writes = service(db_path, approval="bulk", max_files=2)
    staged = writes.stage(SPECS["kms_rename_folder"], args)
    assert staged is not None and len(staged.files) == 3 and vault_bytes(root) == before
    approvals.decide(conn, staged.id, approve=True)
    decision = writes.decision(staged)
    assert decision is not None
    out = writes.settle(SPECS["kms_rename_folder"], args, staged, decision)
    assert out["notesMoved"] == 1 and (root / "goals/Target.md").exists()
