"""The dashboard against a real database, real files and real writes (MCP server, Writer,
another process), driven by Pilot. Assertions look at the app's own state and widgets."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.dashboard import settled, wait_for
from support.mcp_session import mcp_client
from support.vaults import note_id
from support.writes import Writer
from textual.widgets import Input, Select, TextArea

from server.activity import feed, provenance
from server.activity.feed import FeedFilter
from server.activity.ratelimit import RateLimiter, session_gauges
from server.activity.session_registry import end_session, start_session
from tui.app import KmsDashboard, create_app
from tui.messages import InvocationsArrived, SessionsChanged
from tui.poller import Poller
from tui.screens.invocation import InvocationScreen
from tui.screens.modals import NoteScreen, ReadsScreen, ReviewScreen
from tui.screens.settings import SettingsScreen
from tui.widgets.detail import DetailView

REPO = Path(__file__).resolve().parents[2]
QUICK = "Quick capture"


def make_app(db_path: Path, tmp_path: Path, **kw: Any) -> KmsDashboard:
    kw.setdefault("poll_interval", 0.05)
    return create_app(db_path, settings_path=tmp_path / "config.toml", **kw)


def ws(db_path: Path, session: str = "s000000000001", **kw: Any) -> Writer:
    return Writer(db_path, session, kw.pop("limits", RateLimiter(100, 1000)), ["drafts", "inbox"], **kw)


def feed_ids(app: KmsDashboard) -> list[int]:
    table = app.dashboard.feed
    return [int(r.key.value) for r in table.ordered_rows]  # type: ignore[arg-type]


def detail_of(app: KmsDashboard) -> Any:
    return app.dashboard.query_one("#detail").detail  # type: ignore[attr-defined]


async def open_settled(app: KmsDashboard, pilot: Any) -> None:
    await wait_for(pilot, lambda: settled(app), what="the dashboard to load")


async def select_row(app: KmsDashboard, pilot: Any, invocation_id: int) -> None:
    app.dashboard.feed.select(invocation_id)
    await wait_for(
        pilot,
        lambda: (d := detail_of(app)) is not None and d.invocation["id"] == invocation_id,
        what=f"detail of #{invocation_id}",
    )


# ----------------------------------------------------------------------------- headless core


def test_feed_page_is_a_window_and_pages_back(indexed: apsw.Connection) -> None:
    for i in range(1, 1201):
        provenance.record(indexed, tool="kms_append", session_id=f"s{i % 3}", status="error" if i % 10 else "success")
    page = feed.feed_page(indexed, limit=500)
    assert [r["id"] for r in page.rows] == list(range(1200, 700, -1))
    assert page.more and page.high_water == 1200
    assert "inserted_text" not in page.rows[0]  # light columns only
    older = feed.feed_page(indexed, before_id=701, limit=500)
    assert older.rows[0]["id"] == 700 and older.rows[-1]["id"] == 201
    ok = feed.feed_page(indexed, FeedFilter(status="success", session="s0"), limit=500)
    assert {r["status"] for r in ok.rows} == {"success"} and all(r["id"] % 30 == 0 for r in ok.rows)
    assert [r["id"] for r in feed.feed_since(indexed, 1195, limit=3)] == [1196, 1197, 1198]


def test_search_reverted_and_context(indexed: apsw.Connection) -> None:
    w = ws(Path(indexed.filename))
    qid = note_id(indexed, QUICK)
    first = w.append(qid, "- zebra crossing idea")["invocationId"]
    second = w.append(qid, "- another zebra")["invocationId"]
    w.append(qid, "- unrelated")
    found = feed.search_feed(indexed, "zebra")
    assert [r["id"] for r in found] == [second, first]  # newest first
    assert feed.search_feed(indexed, "zebra", FeedFilter(session="nobody")) == []
    assert feed.search_feed(indexed, '"') == []  # user text is never FTS syntax

    from server.writes.undo import revert

    rid = revert.revert(indexed, first)["invocationId"]
    assert feed.reverted_ids(indexed) == {first: rid}

    lines = feed.context_lines("a\nb\nkeep INS tail\nc\nd\ne", 9, 3, around=1)
    assert [(cl.number, cl.inserted) for cl in lines] == [(2, False), (3, True), (4, False)]
    assert lines[1].pieces == (("keep ", False), ("INS", True), (" tail", False))


def test_invocation_detail_follows_the_note_as_it_is_now(indexed: apsw.Connection, vault_dir: Path) -> None:
    w = ws(Path(indexed.filename))
    qid = note_id(indexed, QUICK)
    inv = w.append(qid, "- brand new line")["invocationId"]
    d = feed.invocation_detail(indexed, inv)
    assert d is not None and d.note.state == "present"
    assert any(cl.inserted and "- brand new line" in "".join(t for t, _ in cl.pieces) for cl in d.note.lines)
    path = vault_dir / "inbox" / f"{QUICK}.md"
    path.write_text("prefix\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    assert feed.invocation_detail(indexed, inv).note.state == "moved"  # type: ignore[union-attr]
    path.write_text(path.read_text(encoding="utf-8").replace("brand new", "edited"), encoding="utf-8")
    assert feed.invocation_detail(indexed, inv).note.state == "edited"  # type: ignore[union-attr]
    path.unlink()
    assert feed.invocation_detail(indexed, inv).note.state == "missing"  # type: ignore[union-attr]


def test_gauges_and_session_states(indexed: apsw.Connection) -> None:
    db = Path(indexed.filename)
    now = [time.time()]
    start_session(indexed, session_id="slive", now=now[0])
    start_session(indexed, session_id="sended", now=now[0] - 100)
    end_session(indexed, "sended", 3, now=now[0] - 50)
    start_session(indexed, session_id="sgone", pid=2**22 + 12345, now=now[0] - 1000)
    w = ws(db, "slive", limits=RateLimiter(2, 3, clock=lambda: now[0]))
    qid = note_id(indexed, QUICK)
    w.append(qid, "one")
    now[0] += 1
    w.append(qid, "two")
    g = session_gauges(indexed, now[0])["slive"]
    assert (g.window_count, g.per_minute, g.total, g.per_session) == (2, 2, 2, 3)
    assert g.next_write_at == pytest.approx(now[0] - 1 + 60) and not g.exhausted
    assert session_gauges(indexed, now[0] + 61)["slive"].next_write_at is None
    now[0] += 61
    w.append(qid, "three")
    assert session_gauges(indexed, now[0])["slive"].exhausted
    states = {s.id: s.state for s in feed.session_overview(indexed, now[0] - 61)}
    assert states == {"slive": "live", "sended": "ended", "sgone": "gone"}


def test_poller_reports_only_changes(indexed: apsw.Connection, tmp_path: Path) -> None:
    db = Path(indexed.filename)
    provenance.record(indexed, tool="kms_append", session_id="s1", status="success")
    ticks = [1000.0]
    poller = Poller(db, clock=time.time, settings_path=tmp_path / "config.toml", ticker=lambda: ticks[0])
    try:
        first = poller.first()
        assert isinstance(first[0], InvocationsArrived) and first[0].initial and len(first[0].rows) == 1
        assert poller.poll() == []  # nothing changed and no second has passed
        ticks[0] += 1.05  # the once-a-second refresh is due: it re-reads, and nothing differs
        assert not [m for m in poller.poll() if not isinstance(m, SessionsChanged)]
        new = provenance.record(indexed, tool="kms_create", session_id="s2", status="error")
        arrived = [m for m in poller.poll() if isinstance(m, InvocationsArrived)]
        assert [r["id"] for m in arrived for r in m.rows] == [new]
        assert not [m for m in poller.poll() if isinstance(m, InvocationsArrived)]
    finally:
        poller.close()


# ----------------------------------------------------------------------------- the app


async def test_dashboard_shows_real_mcp_writes(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    async with mcp_client(db_path, write_enabled=True, allowlist=("drafts",)) as client:
        session = client.runner.config.session_id
        client.runner.services.heartbeat.add(client.runner.session)  # as `kms mcp`
        made = await client.call_tool("kms_create", {"title": "Agent note", "content": "hello", "folder": "drafts"})
        nid = made.structured_content["noteId"]
        await client.call_tool("kms_append", {"noteId": nid, "content": "more"})
        denied = await client.call_tool("kms_create", {"title": "x", "folder": "projects"})
        assert denied.is_error
        app = make_app(db_path, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_settled(app, pilot)
            assert feed_ids(app) == [3, 2, 1]
            assert [app.dashboard.feed.rows_by_id[i]["status"] for i in (3, 2, 1)] == [
                "folder-denied",
                "success",
                "success",
            ]
            sessions = {s.id: s for s in app.state.sessions}
            assert sessions[session].kind == "server" and sessions[session].state == "live"
            assert sessions[session].gauge.total == 2 and sessions[session].gauge.per_minute == 10
            top = str(app.dashboard.query_one("#topbar").render_text())  # type: ignore[attr-defined]
            assert "sample" in top and "notes" in top and "write ✗" in top
            cell = app.dashboard.feed.get_cell("3", "status")
            assert str(cell) == "⊘ refused"  # a symbol and a word, not colour alone


WRITER = """
import json, sys, time
from server.activity.ratelimit import RateLimiter, session_gauges
from server.mcp.tools.write_tools import WRITE_TOOLS
from pathlib import Path
from server.activity.agent_session import AgentSession
from server.config.session_contract import SessionConfig
from server.writes.guard import WriteService
config = SessionConfig(db_path=Path(sys.argv[1]), config_path=Path(sys.argv[1] + ".toml"), enabled=True,
                       read_enabled=True, write_enabled=True, session_id="sother0000001", allowlist=("inbox",))
ws = WriteService(AgentSession.open(config, limits=RateLimiter(100, 1000)))
append = next(s for s in WRITE_TOOLS if s.name == "kms_append")
print("ready", flush=True)
sys.stdin.readline()
result = ws.call(append, {"noteId": sys.argv[2], "content": "- written by another process"})
print(json.dumps({"id": result["invocationId"], "at": time.time()}), flush=True)
"""


async def test_a_server_session_shows_its_limits_before_it_writes(
    db_path: Path, tmp_path: Path, indexed: apsw.Connection
) -> None:
    async with mcp_client(db_path, write_enabled=True, per_minute=10, per_session=200) as client:
        session = client.runner.config.session_id
        client.runner.services.heartbeat.add(client.runner.session)  # as `kms mcp`
        app = make_app(db_path, tmp_path)
        async with app.run_test(size=(120, 30)) as pilot:
            await open_settled(app, pilot)
            table = app.dashboard.query_one("#sessions")
            assert str(table.get_cell(session, "minute")).endswith(" 0/10")  # type: ignore[attr-defined]
            assert str(table.get_cell(session, "total")) == "0/200"  # type: ignore[attr-defined]
            assert str(table.get_cell(session, "next")) == "✓ now"  # type: ignore[attr-defined]


async def test_row_from_another_process_arrives_live(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    """Another process's write reaches the open dashboard through the poller, without a reload. How
    fast is measured by ``bench/bench_tui.py`` (tail latency), not asserted here: a timed assertion
    on a shared machine fails under load without telling anything."""
    qid = note_id(indexed, QUICK)
    app = make_app(db_path, tmp_path, poll_interval=0.25)
    seen: list[InvocationsArrived] = []
    async with app.run_test(
        message_hook=lambda m: seen.append(m) if isinstance(m, InvocationsArrived) else None
    ) as pilot:
        await open_settled(app, pilot)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WRITER,
            str(db_path),
            qid,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 30)).strip() == b"ready"  # imports done
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        written = json.loads(line)
        await wait_for(pilot, lambda: written["id"] in app.state.arrivals, timeout=10, what="the row")
        assert feed_ids(app)[0] == written["id"]
        assert any(r["id"] == written["id"] for m in seen if not m.initial for r in m.rows)
        await proc.wait()


async def test_filters_narrow_the_feed_and_live_rows_respect_them(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    qid = note_id(indexed, QUICK)
    a, b = ws(db_path, "saaaaaaaaaaaa"), ws(db_path, "sbbbbbbbbbbbb")
    a.append(qid, "one")
    b.append(qid, "two")
    with pytest.raises(Exception):  # noqa: B017 - folder-denied, recorded either way
        b.create("nope", folder="projects")
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_settled(app, pilot)
        assert feed_ids(app) == [3, 2, 1]
        app.dashboard.query_one("#f-status", Select).value = "success"
        await wait_for(pilot, lambda: feed_ids(app) == [2, 1], what="status filter")
        app.dashboard.filters.set_session("sbbbbbbbbbbbb")
        await wait_for(pilot, lambda: feed_ids(app) == [2], what="session filter")
        a.append(qid, "live but other session")
        new = b.append(qid, "live and matching")["invocationId"]
        await wait_for(pilot, lambda: feed_ids(app) == [new, 2], what="matching live row")
        assert "status=success" in str(app.dashboard.feed.border_subtitle)
        app.dashboard.query_one("#f-tool", Select).value = "kms_create"
        await wait_for(pilot, lambda: feed_ids(app) == [], what="tool filter")
        await pilot.press("x")
        await wait_for(pilot, lambda: feed_ids(app) == [new, new - 1, 3, 2, 1], what="cleared filters")


async def test_search_box_uses_the_provenance_fts(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    qid = note_id(indexed, QUICK)
    w = ws(db_path)
    w.append(qid, "- aardvark sighting")
    w.append(qid, "- nothing special")
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_settled(app, pilot)
        await pilot.press("slash", *"aardvark", "enter")
        await wait_for(pilot, lambda: feed_ids(app) == [1], what="search results")
        assert app.dashboard.focused is app.dashboard.feed
        new = w.append(qid, "- aardvark again")["invocationId"]
        await wait_for(pilot, lambda: new in app.state.arrivals, what="tail row")
        assert feed_ids(app) == [1]  # search results stay put; the tail is counted
        assert "1 new" in str(app.dashboard.feed.border_subtitle)
        app.dashboard.query_one("#search", Input).value = ""
        await wait_for(pilot, lambda: feed_ids(app) == [new, 2, 1], what="feed back")


async def test_detail_shows_inserted_text_in_context(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    qid = note_id(indexed, QUICK)
    inv = ws(db_path).insert_at(qid, "INSERTED LINE", {"afterHeading": QUICK})["invocationId"]
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        d = detail_of(app)
        assert d.invocation["id"] == inv and d.note.state == "present"
        inserted = [cl for cl in d.note.lines if cl.inserted]
        assert ["".join(t for t, _ in cl.pieces) for cl in inserted] == ["", "INSERTED LINE"]  # its blank line too
        assert any(not cl.inserted for cl in d.note.lines)  # context around it
        text = app.dashboard.query_one(DetailView).text()
        assert "INSERTED LINE" in text and "still there, unchanged" in text and "Bytes" in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, InvocationScreen), what="detail screen")
        await wait_for(pilot, lambda: app.screen.query_one("#detail-full").detail is not None)  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.dashboard)


async def test_revert_removes_exactly_the_inserted_text(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    path = vault_dir / "inbox" / f"{QUICK}.md"
    before = path.read_bytes()
    async with mcp_client(db_path, write_enabled=True, allowlist=("inbox",)) as client:
        r = await client.call_tool("kms_append", {"noteId": note_id(indexed, QUICK), "content": "- take me back"})
        inv = r.structured_content["invocationId"]
    assert path.read_bytes() != before
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        await select_row(app, pilot, inv)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="review modal")
        assert app.screen.preview["canRevert"] and "- take me back" in app.screen.preview["removeText"]  # type: ignore[attr-defined]
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.last_revert, dict), what="the revert")
        assert path.read_bytes() == before  # exactly the inserted text is gone
        rid = app.last_revert["invocationId"]  # type: ignore[index]
        row = provenance.get_invocation(indexed, rid)
        assert row is not None and (row["actor"], row["tool"], row["reverts_id"]) == ("person", "revert", inv)
        await wait_for(pilot, lambda: app.state.reverted.get(inv) == rid and rid in feed_ids(app), what="feed")
        assert str(app.dashboard.feed.get_cell(str(inv), "status")) == "↶ reverted"


async def test_revert_is_refused_when_the_text_was_edited_since(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    path = vault_dir / "inbox" / f"{QUICK}.md"
    w = ws(db_path)
    inv = w.append(note_id(indexed, QUICK), "- agent line")["invocationId"]
    path.write_text(path.read_text(encoding="utf-8").replace("- agent line", "- person rewrote it"), encoding="utf-8")
    edited = path.read_bytes()
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        await select_row(app, pilot, inv)
        assert detail_of(app).note.state == "edited"
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="review modal")
        preview = app.screen.preview  # type: ignore[attr-defined]
        assert not preview["canRevert"] and "edited since" in preview["reason"]
        await pilot.press("y")  # refused: confirming does nothing
        await wait_for(pilot, lambda: app.screen is app.dashboard)
        assert path.read_bytes() == edited and app.last_revert is None


async def test_revert_is_refused_when_edited_between_preview_and_confirm(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    path = vault_dir / "inbox" / f"{QUICK}.md"
    inv = ws(db_path).append(note_id(indexed, QUICK), "- agent line")["invocationId"]
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        await select_row(app, pilot, inv)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="review modal")
        path.write_text(path.read_text(encoding="utf-8").replace("- agent line", "- changed"), encoding="utf-8")
        edited = path.read_bytes()
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_revert is not None, what="the refusal")
        assert getattr(app.last_revert, "kind", None) == "conflict"
        assert path.read_bytes() == edited
        refusal = feed.feed_page(indexed, FeedFilter(tool="revert")).rows[0]
        assert (refusal["status"], refusal["reverts_id"]) == ("conflict", inv)  # recorded by the revert module


async def test_a_session_that_only_searched_read_no_note(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """Issue 32: search hits and backlink snippets are not reads: a session that only searched shows 0 reads in
    the dashboard's Reads and in ``kms session list``; its queries are its searches."""
    from support.cli import kms, ok

    from server.activity import session_material

    sid = start_session(indexed, session_id="s000000000077", kind="launcher")  # as `kms claude` records it
    async with mcp_client(db_path, session_id=sid) as client:
        for tool, args in (
            ("kms_search", {"query": "kubernetes"}),
            ("kms_semantic_search", {"query": "kubernetes"}),
            ("kms_get_backlinks", {"noteId": "Shakshuka"}),
        ):
            r = await client.call_tool(tool, args)
            assert not r.is_error and (r.structured_content.get("hits") or r.structured_content.get("backlinks")), (
                tool,
                r.structured_content,
            )
        client.runner.session.reads.flush()
    assert [s["tool"] for s in session_material.searches(indexed, sid)] == ["kms_search", "kms_semantic_search"]
    listed = {s["id"]: s for s in json.loads(ok(kms("session", "list", "--json")).stdout)}
    assert listed[sid]["reads"] == 0
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_settled(app, pilot)
        await pilot.press("1")
        table = app.dashboard.query_one("#sessions")
        table.move_cursor(row=table.get_row_index(sid))  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReadsScreen), what="reads")
        screen = app.screen
        assert screen.session_id == sid and screen.reads == []  # type: ignore[attr-defined]
        assert screen.query_one("#dialog").border_subtitle == "0 notes"


async def test_open_note_and_session_reads(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    qid = note_id(indexed, QUICK)
    async with mcp_client(db_path, write_enabled=True, allowlist=("inbox",)) as client:
        session = client.runner.config.session_id
        await client.call_tool("kms_read", {"noteId": qid})
        r = await client.call_tool("kms_append", {"noteId": qid, "content": "- opened in the viewer"})
        inv = r.structured_content["invocationId"]
        client.runner.session.reads.flush()  # the tracker writes in batches
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_settled(app, pilot)
        await select_row(app, pilot, inv)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, NoteScreen), what="note modal")
        area = app.screen.query_one(TextArea)
        assert area.selected_text == "\n\n- opened in the viewer"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.dashboard)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReadsScreen), what="reads")
        screen = app.screen
        assert screen.session_id == session and [r["note_id"] for r in screen.reads] == [qid]  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NoteScreen), what="read note")
        assert app.screen.note.label == f"sample/inbox/{QUICK}.md"  # type: ignore[attr-defined]


async def test_settings_screen_validates_and_saves(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        await open_settled(app, pilot)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="settings")
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        screen.set_text("write.per_minute", "0")
        screen.set_text("write.allowlist", "drafts /etc")
        await pilot.pause()
        assert "outside 1..10000" in screen.errors["write.per_minute"]
        assert "vault-relative" in screen.errors["write.allowlist"]
        assert screen.query_one("#err-write-per_minute").display
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
        assert not cfg.exists()  # nothing saved while a value is invalid
        screen.set_text("write.per_minute", "5")
        screen.set_text("write.allowlist", "drafts inbox/*")
        screen.set_text("agent.write", "true")
        await pilot.pause()
        assert not screen.errors
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: screen.saved, what="save")
        text = cfg.read_text()
        assert "per_minute = 5" in text and '"inbox/*"' in text and "write = true" in text
        assert "per_session" not in text  # unchanged keys are not pinned into the file
        status = str(screen.query_one("#settings-status").content)  # type: ignore[attr-defined]
        assert "next agent session" in status
        await pilot.press("escape")
        settings = lambda: app.state.settings  # noqa: E731
        await wait_for(
            pilot, lambda: (now := settings()) is not None and now.get("write.per_minute") == 5, what="header settings"
        )
        top = str(app.dashboard.query_one("#topbar").render_text())  # type: ignore[attr-defined]
        assert "write ✓" in top and "drafts inbox/*" in top


async def test_help_and_command_palette(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.dashboard)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette", what="palette")
        await pilot.press(*"Settings")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="settings via palette")


async def test_older_rows_load_on_demand(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    with indexed:
        indexed.executemany(
            "INSERT INTO tool_invocations(at, session_id, tool, input_summary, status)"
            " VALUES (?, 's1', 'kms_append', '', 'success')",
            [(1e9 + i,) for i in range(1200)],
        )
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        feed = app.dashboard.feed
        await wait_for(pilot, lambda: feed.row_count == 500 and not feed.filling, what="the first window")
        assert feed.more
        feed.focus()
        await pilot.press("end")
        await wait_for(pilot, lambda: feed.row_count == 1000, what="second page")
        await pilot.press("end")
        await wait_for(pilot, lambda: feed.row_count == 1200 and not feed.more, what="last page")
        assert feed_ids(app) == list(range(1200, 0, -1))


async def test_gauge_shows_the_limit_and_when_it_lifts(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    qid = note_id(indexed, QUICK)
    start_session(indexed, session_id="slimited00001")
    w = ws(db_path, "slimited00001", limits=RateLimiter(2, 100))
    w.append(qid, "a")
    w.append(qid, "b")
    with pytest.raises(Exception):  # noqa: B017 - rate-limited
        w.append(qid, "c")
    offset = [0.0]
    app = make_app(db_path, tmp_path, clock=lambda: time.time() + offset[0])
    async with app.run_test(size=(120, 30)) as pilot:
        await open_settled(app, pilot)
        table = app.dashboard.query_one("#sessions")
        assert str(table.get_cell("slimited00001", "minute")).endswith("2/2")  # type: ignore[attr-defined]
        assert str(table.get_cell("slimited00001", "next")).startswith("◷ in ")  # type: ignore[attr-defined]
        offset[0] = 61.0
        await wait_for(
            pilot,
            lambda: str(table.get_cell("slimited00001", "next")) == "✓ now",  # type: ignore[attr-defined]
            timeout=3,
            what="the limit to lift",
        )
        assert str(table.get_cell("slimited00001", "minute")).endswith("0/2")  # type: ignore[attr-defined]


async def test_a_database_problem_is_shown_not_fatal(tmp_path: Path) -> None:
    broken = tmp_path / "not-a-db"
    broken.mkdir()  # a directory where the database should be: every open fails
    app = create_app(broken, settings_path=tmp_path / "config.toml", poll_interval=0.05)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: len(list(app._notifications)) > 0, what="the notice")  # noqa: SLF001
        assert "database" in next(iter(app._notifications)).message  # noqa: SLF001
        await pilot.pause(1.2)  # retried, still running, reported once
        assert app.is_running and len(list(app._notifications)) == 1  # noqa: SLF001


async def test_header_is_one_line_and_keeps_what_matters_when_narrow(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text('[write]\nper_minute = "many"\n')  # a mistyped value
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        await wait_for(pilot, lambda: app.state.settings is not None, what="settings")
        await pilot.pause()
        bar = app.dashboard.query_one("#topbar")
        shown = str(bar.render())
        assert bar.size.height == 1 and len(shown) <= 80
        assert "⚠ settings file problem" in shown  # never cut off by a narrow terminal
        assert "/session" not in shown  # the rate limits go first (the Sessions table has them)
        await pilot.resize_terminal(200, 24)
        await pilot.pause()
        assert "10/min 200/session" in str(bar.render()) and bar.size.height == 1


async def test_an_80x24_terminal_keeps_the_header_facts_quit_and_five_sessions(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    for i in range(7):
        start_session(indexed, kind="server", session_id=f"s{i:012d}", argv=["kms", "mcp"])
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        await wait_for(pilot, lambda: len(app.state.sessions) == 7, what="the sessions")
        await pilot.pause(0.1)
        top = str(app.dashboard.query_one("#topbar").render())
        assert "/min" in top and "/sess" in top and "allow" in top and "w✗" in top and "…" not in top
        assert "allow any folder" in top and "(none)" not in top  # an empty allowlist: any folder (issue 32)
        assert app.dashboard.query_one("#sessions").region.height == 7, "border, header and five sessions"
        await wait_for(
            pilot, lambda: "Quit" in (s := app.export_screenshot()) and "Help" in s, what="Quit and Help in the footer"
        )
        assert app.dashboard.query_one("#feed").region.height >= 8, "the feed keeps most of the height"


async def test_demo_narration_shows_in_the_dashboard_and_the_end_stays(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)

        def shown() -> list[tuple[str, str, str, float]]:
            return [(n.title, n.message, n.severity, n.timeout) for n in app._notifications]

        app.narrate("step", "agent searches: auth error handling")
        await pilot.pause(0.1)
        assert shown() == [("Demo: the agent", "agent searches: auth error handling", "information", 6.0)]
        app.narrate("denied", "  write 4: rate-limited (retry in 60s)")
        await pilot.pause(0.1)
        assert shown() == [("Demo", "write 4: rate-limited (retry in 60s)", "warning", 6.0)]
        app.narrate("end", "The demo is over: press q to quit.")
        await pilot.pause(0.1)
        assert [(t, timeout >= 3600) for t, _m, _s, timeout in shown()] == [("Demo finished", True)]


async def test_a_failed_demo_step_shows_as_an_error_that_stays(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """``kms demo`` whose step failed or stalled: the step and the story's stop stay on screen as errors (the
    person may be reading something else when it happens), not a 6-second note among the steps."""
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        app.narrate("failed", "step failed: agent creates a note in drafts/: did not finish within 60 s")
        app.narrate("failed-end", "The demo stopped: agent creates a note in drafts/. Press q.")
        await pilot.pause(0.1)
        shown = [(n.title, n.message, n.severity, n.timeout) for n in app._notifications]
        assert (
            "Demo: a step failed",
            "step failed: agent creates a note in drafts/: did not finish within 60 s",
            "error",
            3600.0,
        ) in shown
        assert ("Demo stopped", "The demo stopped: agent creates a note in drafts/. Press q.", "error", 3600.0) in shown


async def test_the_demos_story_shows_one_line_at_a_time(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """Each line of the story stacked a toast of its own; on a loaded machine they stayed for over a minute and
    covered the Detail pane. A new line now takes the place of the last."""
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settled(app, pilot)
        for n in range(6):  # a second apart in the demo: each shown before the next comes
            app.narrate("step", f"agent step {n}")
            await pilot.pause(0.05)
        assert [n.message for n in app._notifications] == ["agent step 5"]
        app.narrate("failed", "step failed: agent step 6: did not finish")
        await pilot.pause(0.05)
        app.narrate("info", "what the story says after it")  # a failure stays, whatever comes after it
        app.narrate("failed-end", "The demo stopped. Press q.")
        await pilot.pause(0.1)
        assert [n.severity for n in app._notifications] == ["information", "error", "information", "error"]


async def test_o_on_a_session_row_opens_its_session_note(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """The sessions table links each session to the note kms wrote for it (issue 26)."""
    import dataclasses

    from server.writes.capture import capture

    qid = note_id(indexed, QUICK)
    async with mcp_client(db_path, session_id="s000000000042") as client:
        await client.call_tool("kms_start", {})
        await client.call_tool("kms_read", {"noteId": qid})
        config = dataclasses.replace(client.runner.config, capture_enabled=True)
        client.runner.session.reads.flush()
    written = capture(config, "SessionEnd")
    assert written["written"] is True
    start_session(indexed, session_id="s000000000043", kind="launcher")  # no note
    app = make_app(db_path, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_settled(app, pilot)
        await pilot.press("1")
        table = app.dashboard.query_one("#sessions")
        for sid, expect_note in (("s000000000043", False), ("s000000000042", True)):
            table.move_cursor(row=table.get_row_index(sid))  # type: ignore[attr-defined]
            await pilot.pause()
            await pilot.press("o")
            if expect_note:
                await wait_for(pilot, lambda: isinstance(app.screen, NoteScreen), what="the session note")
                assert app.screen.note.label == f"sample/{written['path']}"  # type: ignore[attr-defined]
            else:
                await pilot.pause()
                assert app.screen is app.dashboard
