"""The review pages beyond the queue: sessions (what each read and changed, pause and resume, undo of a session
or of one unit), a note's history with diffs and restore, edits made outside kms, tokens; every route answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.remote import GRANT_PARAMS
from support.review import SESSION, make_world, post, signed_in
from support.writes import Writer

from server.activity import control, remote_grants, tokens
from server.config.scopes import Scopes
from server.store.db import scalar


def wrote(world_root: Path, db_path: Path, text: str, session_id: str = SESSION) -> int:
    """A write by a session whose writes need no approval; the id of its provenance row."""
    from server.store.db import connect

    conn = connect(db_path)
    note_id = scalar(conn, "SELECT id FROM notes WHERE path = 'inbox/Plan.md'")
    Writer(db_path, session_id).call("kms_append", noteId=note_id, content=text)
    return int(
        scalar(conn, "SELECT max(id) FROM tool_invocations WHERE session_id = ? AND status = 'success'", (session_id,))
    )


def test_undo_of_a_unit_restores_the_bytes(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    before = (world.env.root / "inbox/Plan.md").read_bytes()
    inv = wrote(world.env.root, world.env.db_path, "- to be undone")
    assert b"- to be undone" in (world.env.root / "inbox/Plan.md").read_bytes()
    c = signed_in(world.env.db_path)
    page = c.get(f"/review/sessions/{SESSION}").text
    assert f"/review/changes/{inv}/undo" in page
    got = post(c, f"/review/changes/{inv}/undo", {"next": f"/review/sessions/{SESSION}"})
    assert got.status_code == 303 and f"done=reverted&n={inv}" in got.headers["location"]
    assert (world.env.root / "inbox/Plan.md").read_bytes() == before
    assert "undone by #" in c.get(f"/review/sessions/{SESSION}").text


def test_undo_of_a_unit_is_refused_after_an_outside_edit_and_changes_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    inv = wrote(world.env.root, world.env.db_path, "- the agent's line")
    note = world.env.root / "inbox/Plan.md"
    edited = note.read_bytes().replace(b"- the agent's line", b"- the person rewrote it")
    note.write_bytes(edited)
    c = signed_in(world.env.db_path)
    got = post(c, f"/review/changes/{inv}/undo")
    assert got.status_code == 409 and "Nothing was changed" in got.text
    assert note.read_bytes() == edited


def test_undo_of_a_session_reverts_every_change_it_made(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    before = (world.env.root / "inbox/Plan.md").read_bytes()
    wrote(world.env.root, world.env.db_path, "- one")
    wrote(world.env.root, world.env.db_path, "- two")
    c = signed_in(world.env.db_path)
    page = c.get(f"/review/sessions/{SESSION}").text
    assert "Undo 2 change(s)" in page
    shown = re.search(r'name="shown" value="([^"]*)"', page).group(1)  # type: ignore[union-attr]
    got = post(c, f"/review/sessions/{SESSION}/undo", {"shown": json.loads(shown.replace("&#34;", '"'))})
    assert got.status_code == 303 and "done=undone&n=2" in got.headers["location"]
    assert (world.env.root / "inbox/Plan.md").read_bytes() == before
    assert "Nothing to undo" in c.get(f"/review/sessions/{SESSION}").text


def test_pause_and_resume_a_session_from_its_page(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    wrote(world.env.root, world.env.db_path, "- a write")
    c = signed_in(world.env.db_path)
    assert post(c, f"/review/sessions/{SESSION}/control/pause").status_code == 303
    assert control.state_of(world.env.conn, SESSION)[0] == "paused"
    assert "paused" in c.get("/review/sessions").text
    assert post(c, f"/review/sessions/{SESSION}/control/resume").status_code == 303
    assert control.state_of(world.env.conn, SESSION)[0] == "active"
    assert post(c, f"/review/sessions/{SESSION}/control/explode").status_code == 404


def test_a_notes_history_shows_versions_a_diff_and_restores_one(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    first = (world.env.root / "inbox/Plan.md").read_bytes()
    wrote(world.env.root, world.env.db_path, "- later line")
    c = signed_in(world.env.db_path)
    page = c.get("/review/history?note=inbox/Plan.md").text
    assert "v:inbox/Plan.md" in page and "vs now" in page
    diff = c.get("/review/history?note=inbox/Plan.md&vault=v&a=1").text
    assert '<span class="del">-- later line</span>' in diff and "Restore version 1" in diff
    expect = re.search(r'name="expect" value="([0-9a-f]*)"', diff).group(1)  # type: ignore[union-attr]
    note_id = scalar(world.env.conn, "SELECT id FROM notes WHERE path = 'inbox/Plan.md'")
    got = post(c, "/review/history/restore", {"note": note_id, "vault": "v", "version": "1", "expect": expect})
    assert got.status_code == 303, got.text
    assert (world.env.root / "inbox/Plan.md").read_bytes() == first
    # the form of a page drawn before: the file changed since, so the restore is refused
    stale = post(c, "/review/history/restore", {"note": note_id, "vault": "v", "version": "2", "expect": expect})
    assert stale.status_code == 409 and (world.env.root / "inbox/Plan.md").read_bytes() == first


def test_tokens_are_listed_and_revoked_from_their_page(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    token, _secret = tokens.create(world.env.conn, label="host:<b>cursor</b>", scopes=Scopes.parse("tier:read"))
    c = signed_in(world.env.db_path)
    page = c.get("/review/tokens").text
    assert "host:&lt;b&gt;cursor&lt;/b&gt;" in page and token.id in page
    assert post(c, f"/review/tokens/{token.id}/revoke").status_code == 303
    assert tokens.get(world.env.conn, token.id).state(1e12) == "revoked"


def test_writes_landed_under_review_after_are_listed_on_the_queue_to_undo_or_keep(tmp_path: Path) -> None:
    """``review.mode = after``: the write lands at once; the queue page lists it, with undo and keep."""
    world = make_world(tmp_path)
    plan = world.env.root / "inbox/Plan.md"
    before = plan.read_bytes()
    note = scalar(world.env.conn, "SELECT id FROM notes WHERE path = 'inbox/Plan.md'")
    writer = Writer(world.env.db_path, SESSION, review_mode="after")
    first = writer.call("kms_append", noteId=note, content="- landed one")["invocationId"]
    second = writer.call("kms_append", noteId=note, content="- landed two")["invocationId"]
    assert b"landed two" in plan.read_bytes()  # landed, nobody asked
    c = signed_in(world.env.db_path)
    page = c.get("/review/").text
    assert "Landed, for a look after" in page
    assert f"/review/changes/{first}/undo" in page and f"/review/landed/{second}/keep" in page
    kept = post(c, f"/review/landed/{second}/keep", {"next": "/review/"})
    assert kept.status_code == 303 and f"done=kept&n={second}" in kept.headers["location"]
    assert f"/review/landed/{second}/keep" not in c.get("/review/").text
    assert post(c, f"/review/changes/{second}/undo", {"next": "/review/"}).status_code == 303
    assert post(c, f"/review/changes/{first}/undo", {"next": "/review/"}).status_code == 303
    assert plan.read_bytes() == before
    assert "Landed, for a look after" not in c.get("/review/").text  # one kept, one undone: nothing left


def test_a_remote_grant_is_listed_with_the_tokens_and_revoked_whole(tmp_path: Path) -> None:
    """Revoking a remote grant's row ends the grant (its access and refresh tokens), as ``kms token revoke``."""
    world = make_world(tmp_path)
    conn = world.env.conn
    remote_grants.save_client(conn, "c1", {"client_id": "c1", "client_name": "claude.ai"})
    issued = remote_grants.exchange_code(conn, remote_grants.issue_code(conn, "c1", GRANT_PARAMS))
    (grant,) = remote_grants.list_grants(conn)
    c = signed_in(world.env.db_path)
    page = c.get("/review/tokens").text
    assert grant["tokenId"] in page and "remote" in page
    assert post(c, f"/review/tokens/{grant['tokenId']}/revoke").status_code == 303
    assert remote_grants.check_access(conn, issued.access_token) is None
    assert (
        scalar(conn, "SELECT count(*) FROM oauth_tokens WHERE grant_id = ? AND revoked_at IS NULL", (grant["id"],)) == 0
    )


def test_every_page_answers_signed_in_and_refuses_signed_out(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    wrote(world.env.root, world.env.db_path, "- a write")
    c = signed_in(world.env.db_path)
    pages = [
        "/review/",
        "/review/sessions",
        f"/review/sessions/{SESSION}",
        "/review/history",
        "/review/history?note=inbox/Plan.md",
        "/review/outside",
        "/review/tokens",
    ]
    for path in pages:
        assert c.get(path).status_code == 200, path
    assert "inbox/Plan.md" in c.get("/review/outside").text
    for name in ("htmx.min.js", "review.js", "review.css"):
        assert c.get(f"/review/static/{name}").status_code == 200
    assert c.get("/review/static/../../etc/passwd").status_code == 404
    assert c.get("/review/static/other.js").status_code == 404
    assert c.get("/review/sessions/nosuchsession").status_code == 404
    assert post(c, "/review/logout").status_code == 303
    for path in pages:
        assert c.get(path).status_code == 401, path  # signed out: the cookie opens nothing any more
