"""Reverting agent writes: exactly what was inserted comes out, nothing else changes."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.sql import value
from support.writes import Env, Writer, make_env

from server.activity import feed
from server.activity.provenance import get_invocation, list_invocations, search_invocations
from server.activity.ratelimit import RateLimiter
from server.errors import KmsError
from server.writes.undo.revert import preview_revert, revert

NOTE = "---\ntitle: T  # keep me\nstatus: draft\n---\n# T\n\npara one\n\n## Log\n- first\n"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


@pytest.fixture
def ws(env: Env) -> Writer:
    return Writer(env.db_path, "agent", RateLimiter(None, None))


def invocation(conn: apsw.Connection, invocation_id: int) -> dict[str, Any]:
    """The provenance row of a call that was recorded."""
    row = get_invocation(conn, invocation_id)
    assert row is not None, invocation_id
    return row


def refused(env: Env, inv: int, kind: str = "conflict") -> KmsError:
    with pytest.raises(KmsError) as e:
        revert(env.conn, inv)
    assert e.value.kind == kind
    return e.value


def test_revert_append_restores_exact_bytes(env: Env, ws: Writer) -> None:
    nid = env.note("n.md", NOTE)
    out = ws.append(nid, "- second", heading="Log", separator="\n")
    preview = preview_revert(env.conn, out["invocationId"])
    assert preview["canRevert"] and preview["removeText"] == "\n- second" and preview["action"] == "remove-text"
    assert env.read("n.md") != NOTE  # preview wrote nothing
    res = revert(env.conn, out["invocationId"])
    assert env.read("n.md") == NOTE and res["reverted"] == out["invocationId"]
    row = invocation(env.conn, res["invocationId"])
    assert row["actor"] == "person" and row["reverts_id"] == out["invocationId"] and row["status"] == "success"
    assert row["session_id"] == "person" and row["lines_added"] == -1
    assert invocation(env.conn, out["invocationId"])["reverted_by"] == res["invocationId"]
    assert value(env.conn, "SELECT content_hash FROM notes WHERE id = ?", (nid,)) == row["hash_after"]
    e = refused(env, out["invocationId"], "invalid-input")
    assert "already reverted" in e.message
    refused(env, res["invocationId"], "invalid-input")  # a revert is not revertable


def test_revert_after_surrounding_edits(env: Env, ws: Writer) -> None:
    nid = env.note("n.md", NOTE)
    out = ws.append(nid, "agent line")
    edited = "person added a line on top\n" + env.read("n.md") + "person tail\n"
    (env.root / "n.md").write_text(edited)
    revert(env.conn, out["invocationId"])
    assert env.read("n.md") == "person added a line on top\n" + NOTE + "person tail\n"


def test_revert_refuses_when_text_was_edited_or_ambiguous(env: Env, ws: Writer) -> None:
    nid = env.note("n.md", NOTE)
    out = ws.append(nid, "agent line")
    path = env.root / "n.md"
    path.write_text(env.read("n.md").replace("agent line", "agent line, edited by person"))
    before = path.read_bytes()
    e = refused(env, out["invocationId"])
    assert "edited since" in e.message and path.read_bytes() == before
    assert list_invocations(env.conn, limit=1)[0]["status"] == "conflict"
    path.write_text("x\n\nagent line\n" + NOTE + "\n\nagent line\n")
    before = path.read_bytes()
    e = refused(env, out["invocationId"])
    assert "more than once" in e.message and path.read_bytes() == before
    assert not preview_revert(env.conn, out["invocationId"])["canRevert"]


def test_revert_insert_at_crlf_bom(env: Env, ws: Writer) -> None:
    raw = codecs.BOM_UTF8 + NOTE.replace("\n", "\r\n").encode()
    nid = env.note("c.md", raw)
    out = ws.insert_at(nid, "inserted\nblock", {"afterBlockContaining": "para one"})
    assert b"para one\r\n\r\ninserted\r\nblock\r\n\r\n## Log" in (env.root / "c.md").read_bytes()
    revert(env.conn, out["invocationId"])
    assert (env.root / "c.md").read_bytes() == raw


def test_revert_properties(env: Env, ws: Writer) -> None:
    nid = env.note("p.md", NOTE)
    out = ws.update_properties(nid, {"status": "done", "tags": ["a"]}, ["title"])
    preview = preview_revert(env.conn, out["invocationId"])
    assert preview["restore"]["status"] == {"from": "done", "to": "draft"}
    assert preview["restore"]["tags"] == {"from": ["a"], "to": {"__absent__": True}}
    # the person edits an unrelated key meanwhile: revert still works and keeps it
    (env.root / "p.md").write_text(env.read("p.md").replace("---\n#", "extra: 1\n---\n#"))
    res = revert(env.conn, out["invocationId"])
    text = env.read("p.md")
    assert text.startswith("---\nstatus: draft\nextra: 1\ntitle: T\n---\n") and text.endswith(NOTE.split("---\n", 2)[2])
    row = invocation(env.conn, res["invocationId"])
    assert row["props_after"] == {"status": "draft", "tags": {"__absent__": True}, "title": "T"}


def test_revert_properties_refused_when_changed_since(env: Env, ws: Writer) -> None:
    nid = env.note("p.md", NOTE)
    out = ws.update_properties(nid, {"status": "done"})
    ws.update_properties(nid, {"status": "published"})
    before = env.read("p.md")
    e = refused(env, out["invocationId"])
    assert "status" in e.message and env.read("p.md") == before


def test_revert_created_frontmatter_removes_block(env: Env, ws: Writer) -> None:
    body = "# Plain\n\ntext\n"
    nid = env.note("b.md", body)
    out = ws.update_properties(nid, {"tags": ["x"]})
    revert(env.conn, out["invocationId"])
    assert env.read("b.md") == body


def test_revert_create(env: Env, ws: Writer) -> None:
    out = ws.create("New note", "hello", tags=["x"])
    path = env.root / out["path"]
    revert(env.conn, out["invocationId"])
    assert not path.exists()
    assert value(env.conn, "SELECT count(*) FROM notes WHERE id = ?", (out["noteId"],)) == 0
    out2 = ws.create("Other", "hello")
    (env.root / out2["path"]).write_text("hello\nperson wrote more\n")
    refused(env, out2["invocationId"])
    assert (env.root / out2["path"]).exists()


def test_reverting_a_create_moves_the_note_to_the_trash_and_it_can_be_restored(env: Env, ws: Writer) -> None:
    """Nothing is deleted for good but by ``kms trash empty``: a revert of a create included."""
    from server.writes.undo.trash import list_trash, restore

    out = ws.create("Kept note", "hello from the agent", folder="projects/deep")
    path = env.root / out["path"]
    data = path.read_bytes()
    revert(env.conn, out["invocationId"])
    assert not path.exists()
    assert (env.root / ".trash" / out["path"]).read_bytes() == data
    assert [t.path for t in list_trash(env.conn)] == [out["path"]]
    again = ws.create("Kept note", "a second one", folder="projects/deep")  # same path, trashed again
    revert(env.conn, again["invocationId"])
    assert sorted(t.path for t in list_trash(env.conn)) == sorted([out["path"], out["path"][:-3] + " 2.md"])
    restore(env.conn, out["path"])
    assert path.read_bytes() == data


def test_revert_follows_a_moved_note(env: Env, ws: Writer) -> None:
    nid = env.note("old.md", NOTE)
    out = ws.append(nid, "agent line")
    (env.root / "archive").mkdir()
    (env.root / "old.md").rename(env.root / "archive" / "new.md")
    env.reindex()
    assert value(env.conn, "SELECT path FROM notes WHERE id = ?", (nid,)) == "archive/new.md"
    revert(env.conn, out["invocationId"])
    assert env.read("archive/new.md") == NOTE


def test_revert_refusals(env: Env, ws: Writer) -> None:
    nid = env.note("n.md", NOTE)
    refused(env, 999, "not-found")
    with pytest.raises(KmsError):
        ws.append(nid, "x", heading="missing")
    failed = list_invocations(env.conn, limit=1, status="error")[0]
    refused(env, failed["id"], "invalid-input")
    same = ws.update_properties(nid, {"status": "draft"})  # no-op
    refused(env, same["invocationId"], "invalid-input")


def test_listing_and_search(env: Env, ws: Writer) -> None:
    nid = env.note("n.md", NOTE)
    a = ws.append(nid, "zebra crossing")
    ws.update_properties(nid, {"x": 1})
    with pytest.raises(KmsError):
        ws.append("missing-note", "q")
    newest = list_invocations(env.conn)
    assert [r["tool"] for r in newest] == ["kms_append", "kms_update_properties", "kms_append"]
    assert newest[0]["status"] == "error" and newest[0]["error"] == "not-found"
    assert newest[0]["note_id"] == "missing-note"
    assert [r["id"] for r in list_invocations(env.conn, since_id=a["invocationId"])] == [
        a["invocationId"] + 1,
        a["invocationId"] + 2,
    ]
    assert len(list_invocations(env.conn, tool="kms_update_properties", session="agent")) == 1
    hits = search_invocations(env.conn, "zebra", 5)
    assert [h["id"] for h in hits] == [a["invocationId"]]
    assert search_invocations(env.conn, 'AND OR "(', 5) == []  # FTS syntax can't break it
    assert "zebra crossing" in newest[2]["input_summary"]


@pytest.mark.parametrize(
    ("case", "edit", "state"),
    [
        ("intact in place", lambda t: t, "present"),
        ("intact elsewhere", lambda t: "a person's new first line\n\n" + t, "moved"),
        ("a person extended it", lambda t: t.replace("agent line", "agent line, and more"), "edited"),
        ("a person extended it, moved", lambda t: "top\n" + t.replace("agent line", "agent line!"), "edited"),
        ("changed", lambda t: t.replace("agent line", "agent LINE"), "edited"),
        ("a copy, still in place", lambda t: t + "\n\nagent line\n", "present"),
        ("moved, with a copy", lambda t: "x\n\nagent line\n" + t, "ambiguous"),
        ("appended line", lambda t: t.replace("- first\n", "- first\n") + "\n", "present"),
    ],
)
@pytest.mark.parametrize("how", ["append", "insert_at", "insert_after_heading"])
def test_detail_pane_and_revert_agree(env: Env, ws: Writer, case: str, edit: Any, state: str, how: str) -> None:
    """The dashboard's "in the note now" and revert are one rule (``changes.locate``): whatever the
    detail pane calls intact, revert takes out, and whatever it does not, revert refuses."""
    nid = env.note("n.md", NOTE)
    if how == "append":
        out = ws.append(nid, "agent line")
    elif how == "insert_at":
        out = ws.insert_at(nid, "agent line", {"beforeHeading": "Log"})
    else:
        out = ws.insert_at(nid, "agent line", {"afterHeading": "T"})
    inv = out["invocationId"]
    path = env.root / "n.md"
    path.write_text(edit(env.read("n.md")), newline="")
    before = path.read_bytes()
    detail = feed.invocation_detail(env.conn, inv)
    assert detail is not None and detail.note.state == state, case
    preview = preview_revert(env.conn, inv)
    assert preview["canRevert"] is (state in ("present", "moved")), (case, preview["reason"])
    if preview["canRevert"]:
        off, ins, now = preview["offset"], preview["removeText"], env.read("n.md")
        assert off == detail.note.offset and now[off : off + len(ins)] == ins
        revert(env.conn, inv)
        assert env.read("n.md") == now[:off] + now[off + len(ins) :]
    else:
        assert preview["reason"] == detail.note.explanation
        refused(env, inv)
        assert path.read_bytes() == before


def test_detail_pane_and_revert_agree_when_the_note_is_gone(env: Env, ws: Writer) -> None:
    nid = env.note("n.md", NOTE)
    inv = ws.append(nid, "agent line")["invocationId"]
    (env.root / "n.md").unlink()
    detail = feed.invocation_detail(env.conn, inv)
    assert detail is not None and detail.note.state == "missing"
    with pytest.raises(KmsError) as e:
        preview_revert(env.conn, inv)
    assert e.value.kind == "not-found"
    refused(env, inv, "not-found")
    assert list_invocations(env.conn, limit=1)[0]["error"] == "not-found"  # the refusal is recorded too


def test_reverted_by_has_one_answer(env: Env, ws: Writer) -> None:
    """The feed's "reverted" marks and the full row's ``reverted_by`` come from the same index (m005)."""
    nid = env.note("n.md", NOTE)
    first = ws.append(nid, "one")["invocationId"]
    second = ws.append(nid, "two")["invocationId"]
    (env.root / "n.md").write_text(env.read("n.md").replace("two", "TWO"))
    refused(env, second)  # a refused revert reverts nothing
    (env.root / "n.md").write_text(env.read("n.md").replace("TWO", "two"))
    rid = revert(env.conn, first)["invocationId"]
    assert feed.reverted_ids(env.conn) == {first: rid}
    assert invocation(env.conn, first)["reverted_by"] == rid
    assert invocation(env.conn, second)["reverted_by"] is None
    detail = feed.invocation_detail(env.conn, first)
    assert detail is not None and detail.invocation["reverted_by"] == rid
