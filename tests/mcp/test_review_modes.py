"""``review.mode`` and its thresholds (issue 40): ``after`` lets writes land and lists them for one-click undo;
a unit above ``review.max_lines`` / ``review.max_files`` waits for review whatever the mode; the older
``write.approval`` settings map onto the same policy. A real in-memory MCP client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
from support.cli import kms, ok
from support.mcp_session import mcp_client
from support.vaults import note_id

from server.config.review import ReviewPolicy, policy
from server.config.session_contract import SessionConfig


def _listed() -> list[dict[str, Any]]:
    return json.loads(ok(kms("pending", "--after", "--json")).stdout)


async def test_after_mode_writes_land_and_are_listed_for_undo(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    async with mcp_client(db_path, write_enabled=True, review_mode="after") as client:
        first = await client.call_tool("kms_append", {"noteId": nid, "content": "landed one"})
        second = await client.call_tool("kms_create", {"title": "Landed two", "content": "hello"})
        session = client.runner.session.id
    assert not first.is_error and not second.is_error, (first.structured_content, second.structured_content)
    assert "landed one" in (vault_dir / "Home.md").read_text()  # landed at once
    listed = _listed()
    ids = [i["invocationId"] for i in listed]
    assert ids == [second.structured_content["invocationId"], first.structured_content["invocationId"]]
    assert {i["sessionId"] for i in listed} == {session} and listed[1]["path"] == "Home.md"
    ok(kms("revert", str(ids[1]), "--yes"))  # undo one: it drops out of the list by itself
    assert "landed one" not in (vault_dir / "Home.md").read_text()
    assert [i["invocationId"] for i in _listed()] == [ids[0]]
    ok(kms("pending", "--keep", str(ids[0])))  # looked at and kept
    assert _listed() == []


async def test_off_mode_lists_nothing(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, write_enabled=True, review_mode="off") as client:
        done = await client.call_tool("kms_append", {"noteId": note_id(indexed, "Home"), "content": "quiet"})
    assert not done.is_error
    assert _listed() == []


async def test_a_unit_above_the_threshold_waits_for_review_in_after_mode(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    before = (vault_dir / "Home.md").read_bytes()
    config: dict[str, Any] = {"write_enabled": True, "review_mode": "after", "review_max_lines": 4}
    async with mcp_client(db_path, review_detached=True, **config) as client:
        big = await client.call_tool("kms_append", {"noteId": nid, "content": "a\nb\nc\nd\ne\nf"})
        assert big.structured_content["status"] == "staged", big.structured_content
        assert (vault_dir / "Home.md").read_bytes() == before  # it waits, whatever the mode
        small = await client.call_tool("kms_append", {"noteId": nid, "content": "small"})
        assert "status" not in small.structured_content and small.structured_content["changed"] is True
        files = await client.call_tool(
            "kms_create_many", {"notes": [{"title": f"Many {i}", "content": "x"} for i in range(3)]}
        )
    assert not files.is_error and files.structured_content.get("status") != "staged"  # max_files unset
    assert "small" in (vault_dir / "Home.md").read_text()
    async with mcp_client(db_path, review_detached=True, review_max_files=2, **config) as client:
        many = await client.call_tool(
            "kms_create_many", {"notes": [{"title": f"More {i}", "content": "x"} for i in range(3)]}
        )
    assert many.structured_content["status"] == "staged", many.structured_content
    assert not (vault_dir / "More 0.md").exists()


def test_the_older_approval_settings_map_onto_the_policy(tmp_path: Path) -> None:
    base = SessionConfig(tmp_path / "db", tmp_path / "c.toml", True, True, True, "s1")
    assert policy(base) == ReviewPolicy("off")
    assert policy(base.__class__(**{**base.__dict__, "approval": "always"})) == ReviewPolicy("before")
    bulk = base.__class__(**{**base.__dict__, "approval": "bulk", "approval_lines": 7})
    assert policy(bulk) == ReviewPolicy("off", 7, 1)
    # review.* set: the mode and thresholds are theirs; a session forced to ask stays `before`
    after = base.__class__(**{**bulk.__dict__, "review_mode": "after", "review_max_lines": 50})
    assert policy(after) == ReviewPolicy("after", 50, 1)
    forced = base.__class__(**{**after.__dict__, "approval": "always"})
    assert policy(forced).mode == "before"
