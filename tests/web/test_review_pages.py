"""The review pages through Starlette's client: getting in (one-time link, cookie, no bearer), the door of every
POST (Origin, CSRF), the queue and its decisions through the same core as the dashboard and the CLI, escaping of
hostile note text, and the pages with JavaScript off (forms post and redirect)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support.review import ORIGIN, SESSION, World, app, client, csrf, make_world, post, signed_in

from server.activity import approvals, review_access
from server.errors import KmsError
from server.mcp.http_guard import HttpGuard, Origins
from server.store.db import connect, scalar
from server.web.security import COOKIE

APPEND = "kms_append"


def staged_append(world: World, text: str = "- a finding", session_id: str = SESSION) -> tuple[dict[str, Any], Any]:
    note_id = scalar(world.env.conn, "SELECT id FROM notes WHERE path = 'inbox/Plan.md'")
    args = {"noteId": note_id, "content": text}
    return args, world.stage(APPEND, args, session_id)


# ----------------------------------------------------------------------------- getting in


def test_a_login_link_opens_the_pages_once_with_a_strict_httponly_cookie(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    c = client(world.env.db_path)
    assert c.get("/review/").status_code == 401  # no cookie: no page
    secret = review_access.create_link(world.env.conn, "login")
    got = c.get(f"/review/login?t={secret}")
    assert got.status_code == 200
    cookie = got.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Path=/review/" in cookie
    assert 'http-equiv="refresh"' in got.text  # on to the queue without a script
    assert c.get("/review/").status_code == 200
    again = client(world.env.db_path).get(f"/review/login?t={secret}")  # used: never again, for anyone
    assert again.status_code == 401 and "used or expired" in again.text
    stored = [str(r[0]) for r in world.env.conn.execute("SELECT digest FROM review_links")]
    assert stored == [review_access.digest(secret)]  # stored hashed


def test_an_expired_login_link_is_refused(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    old = review_access.create_link(world.env.conn, "login", now=time.time() - review_access.LOGIN_LINK_S - 1)
    assert client(world.env.db_path).get(f"/review/login?t={old}").status_code == 401
    assert client(world.env.db_path).get("/review/login?t=made-up").status_code == 401


def test_a_bearer_token_is_refused_even_with_a_good_cookie(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    c = signed_in(world.env.db_path)
    _args, staged = staged_append(world)
    bearer = {"authorization": "Bearer kms_anything"}
    assert c.get("/review/", headers=bearer).status_code == 401
    got = c.post(f"/review/pending/{staged.id}/approve", data={"csrf": csrf(c)}, headers={**bearer, "origin": ORIGIN})
    assert got.status_code == 401
    assert approvals.get(world.env.conn, staged.id).status == "pending"  # type: ignore[union-attr]


def test_a_post_from_another_origin_or_without_the_csrf_token_changes_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    c = signed_in(world.env.db_path)
    _args, staged = staged_append(world)
    path = f"/review/pending/{staged.id}/approve"
    assert post(c, path, origin="http://evil.example").status_code == 403
    assert post(c, path, origin=None).status_code == 403  # a browser always sends one on a POST
    assert post(c, path, origin="null").status_code == 403
    assert c.post(path, data={"csrf": "0" * 64}, headers={"origin": ORIGIN}).status_code == 403
    assert c.post(path, data={}, headers={"origin": ORIGIN}).status_code == 403
    assert approvals.get(world.env.conn, staged.id).status == "pending"  # type: ignore[union-attr]
    assert post(c, path).status_code == 303  # the same POST, from the page: taken


def test_every_answer_forbids_framing_and_inline_scripts(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    c = signed_in(world.env.db_path)
    for path in ("/review/", "/review/sessions", "/review/login?t=x", "/review/static/htmx.min.js"):
        got = c.get(path)
        csp = got.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp, path
        assert got.headers["x-frame-options"] == "DENY" and got.headers["referrer-policy"] == "same-origin"
    page = c.get("/review/").text
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)  # every script is a file
    assert " style=" not in page and "<style" not in page


# ----------------------------------------------------------------------------- the queue and decisions


def test_hostile_note_text_titles_and_arguments_render_as_text(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    hostile = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
    world.env.note("inbox/Evil.md", f"---\ntitle: {hostile!r}\n---\n# {hostile}\n\nbody\n")
    note_id = scalar(world.env.conn, "SELECT id FROM notes WHERE path = 'inbox/Evil.md'")
    staged = world.stage(APPEND, {"noteId": note_id, "content": f"- {hostile}", "heading": hostile})
    c = signed_in(world.env.db_path)
    for path in ("/review/", f"/review/pending/{staged.id}", f"/review/sessions/{SESSION}"):
        page = c.get(path).text
        assert "<script>alert" not in page and "<img src=x" not in page, path
        assert "&lt;script&gt;alert(" in page, path


def test_the_queue_groups_by_session_newest_first_with_who_where_size_and_the_diff(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    _a, first = staged_append(world, "- first finding")
    _b, second = staged_append(world, "- second finding", session_id="sother00000002")
    _c, third = staged_append(world, "- third finding")
    page = signed_in(world.env.db_path).get("/review/").text
    assert "3 change(s) wait for you" in page
    order = [int(m) for m in re.findall(r'data-pending="(\d+)"', page)]
    assert order == [third.id, first.id, second.id]  # SESSION's group first (its newest is newest), newest first
    assert "v:inbox/Plan.md" in page and "folder inbox" in page and "2 lines in 1 file" in page
    assert '<span class="add">+- third finding</span>' in page  # the diff
    assert "&#34;content&#34;: &#34;- third finding&#34;" in page  # the full arguments


def test_approving_on_the_page_lets_the_waiting_call_write_the_note(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    args, staged = staged_append(world, "- approved on the page")
    c = signed_in(world.env.db_path)
    got = post(c, f"/review/pending/{staged.id}/approve", {"next": "/review/"})
    assert got.status_code == 303 and got.headers["location"] == f"/review/?done=approved&n={staged.id}"
    item = approvals.get(world.env.conn, staged.id)
    assert item is not None and item.status == "approved" and item.channel == "web"
    world.settle(APPEND, args, staged)
    assert "- approved on the page" in world.env.read("inbox/Plan.md")
    assert f"Approved #{staged.id}." in c.get(got.headers["location"]).text  # JS off: the redirect says it


def test_rejecting_with_a_reason_tells_the_agent_and_writes_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    args, staged = staged_append(world, "- rejected on the page")
    before = world.env.read("inbox/Plan.md")
    c = signed_in(world.env.db_path)
    assert post(c, f"/review/pending/{staged.id}/reject", {"reason": "not <this> one"}).status_code == 303
    with pytest.raises(KmsError) as e:
        world.settle(APPEND, args, staged)
    assert e.value.kind == "rejected" and "not <this> one" in e.value.message
    assert world.env.read("inbox/Plan.md") == before


def test_a_whole_session_is_approved_or_rejected_at_once_only_for_the_calls_the_page_showed(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    _a, one = staged_append(world, "- one")
    _b, two = staged_append(world, "- two")
    _c, other = staged_append(world, "- other session", session_id="sother00000002")
    c = signed_in(world.env.db_path)
    _d, unseen = staged_append(world, "- staged after the page was drawn")
    got = post(c, f"/review/sessions/{SESSION}/pending/reject-all", {"ids": [str(one.id), str(two.id), str(other.id)]})
    assert got.status_code == 303 and "done=rejected-all&n=2" in got.headers["location"]
    status = {p: approvals.get(world.env.conn, p).status for p in (one.id, two.id, other.id, unseen.id)}  # type: ignore[union-attr]
    assert status == {one.id: "rejected", two.id: "rejected", other.id: "pending", unseen.id: "pending"}


def test_the_dashboard_and_the_page_deciding_at_once_decide_once(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    c = signed_in(world.env.db_path)
    for _round in range(5):
        _args, staged = staged_append(world)
        start = threading.Barrier(2)
        outcome: dict[str, object] = {}

        def dashboard(
            pid: int = staged.id, start: threading.Barrier = start, outcome: dict[str, object] = outcome
        ) -> None:
            conn = connect(world.env.db_path)
            start.wait()
            try:
                approvals.decide(conn, pid, approve=False, reason="dashboard", channel="dashboard")
                outcome["dashboard"] = "won"
            except KmsError as e:
                outcome["dashboard"] = e.kind

        t = threading.Thread(target=dashboard)
        t.start()
        start.wait()
        page = post(c, f"/review/pending/{staged.id}/approve")
        t.join()
        item = approvals.get(world.env.conn, staged.id)
        assert item is not None
        if outcome["dashboard"] == "won":
            assert page.status_code == 409 and "no longer waiting (rejected" in page.text
            assert item.status == "rejected" and item.channel == "dashboard"
        else:
            assert outcome["dashboard"] == "conflict" and page.status_code == 303
            assert item.status == "approved" and item.channel == "web"
        decisions = scalar(
            world.env.conn,
            "SELECT count(*) FROM tool_invocations WHERE tool IN ('approve', 'reject') AND input_summary LIKE ?",
            (f"pending=#{staged.id} %",),
        )
        assert decisions == 1


def test_the_queue_updates_through_its_poll_only_when_something_changed(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    c = signed_in(world.env.db_path)
    page = c.get("/review/").text
    key = re.search(r"queue/poll\?key=([\w-]+)", page).group(1)  # type: ignore[union-attr]
    assert c.get(f"/review/queue/poll?key={key}").status_code == 204  # nothing new: nothing swapped
    _args, staged = staged_append(world, "- arrives while the page is open")
    got = c.get(f"/review/queue/poll?key={key}")
    assert got.status_code == 200 and f'data-pending="{staged.id}"' in got.text
    assert 'id="queue"' in got.text and "<html" not in got.text  # a fragment, not a page


def test_an_item_page_shows_the_diff_side_by_side_and_its_decision(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    _args, staged = staged_append(world, "- side by side")
    c = signed_in(world.env.db_path)
    page = c.get(f"/review/pending/{staged.id}").text
    assert 'class="side"' in page and "- side by side" in page
    post(c, f"/review/pending/{staged.id}/reject", {"reason": "no"})
    assert "rejected by the person on the review page" in c.get(f"/review/pending/{staged.id}").text
    assert c.get("/review/pending/999999").status_code == 404


def test_a_long_queue_shows_the_newest_page_live_and_older_ones_a_link_away(tmp_path: Path) -> None:
    from server.web.queue import PAGE

    world = make_world(tmp_path)
    ids = [staged_append(world, f"- finding {i}")[1].id for i in range(PAGE + 3)]
    c = signed_in(world.env.db_path)
    page = c.get("/review/").text
    assert f"{PAGE + 3} change(s) wait for you · the newest {PAGE} shown" in page
    shown = [int(m) for m in re.findall(r'data-pending="(\d+)"', page)]
    assert shown == ids[::-1][:PAGE] and "hx-get" in page
    older = re.search(r'href="(/review/\?before=\d+)"', page).group(1)  # type: ignore[union-attr]
    rest = c.get(older).text
    assert [int(m) for m in re.findall(r'data-pending="(\d+)"', rest)] == ids[::-1][PAGE:]
    assert "hx-get" not in rest  # an older page is not replaced by the newest one under the person's eyes


def test_the_service_guard_takes_a_long_reason_in_a_form_and_its_exact_origin_only(tmp_path: Path) -> None:
    """Behind the service's ``HttpGuard`` (as ``kms serve`` runs the pages): a reason of 500 three-byte characters
    (4.5 KB once form-encoded) fits the forms' limit; a page of another origin is refused before the pages."""
    world = make_world(tmp_path)
    _args, staged = staged_append(world)

    async def never(_token: str) -> bool:
        return False

    guarded = HttpGuard(app(world.env.db_path), origins=Origins.for_bind("127.0.0.1", 8765), verify=never)
    c = TestClient(guarded, base_url="http://127.0.0.1:8765", follow_redirects=False)
    link = review_access.create_link(world.env.conn, "login")
    assert c.get(f"/review/login?t={link}").status_code == 200
    here = {"origin": "http://127.0.0.1:8765"}
    assert (
        c.post(f"/review/pending/{staged.id}/reject", data={"csrf": csrf(c)}, headers={"origin": ORIGIN}).status_code
        == 403
    )
    got = c.post(f"/review/pending/{staged.id}/reject", data={"csrf": csrf(c), "reason": "€" * 500}, headers=here)
    assert got.status_code == 303, got.text
    item = approvals.get(world.env.conn, staged.id)
    assert item is not None and item.reason == "€" * 500
