"""The dashboard's service screen (``k``): the service's state and every token (label, kind, scopes, the
session it stands for, last use, state); revoke one after a yes, pause and resume its session."""

from __future__ import annotations

from pathlib import Path

from support.dashboard import seed_fixed, settled, wait_for

from server.activity import control, remote_pairing, review_access, tokens
from server.activity.session_registry import touch_session
from server.config.scopes import Scopes
from server.store.db import connect
from tui.app import create_app
from tui.screens.control import ConfirmScreen
from tui.screens.modals import PairScreen
from tui.screens.service import ServiceScreen


async def test_revoke_a_token_and_pause_its_session(tmp_path: Path) -> None:
    world = seed_fixed(tmp_path / "w")
    conn = connect(world.db_path)
    cursor, _s1 = tokens.create(conn, label="cursor", scopes=Scopes.parse("tier:write folder:drafts"), now=world.now)
    gemini, _s2 = tokens.create(
        conn, label="gemini", scopes=Scopes.parse("tier:read vault:notes vault:work"), now=world.now - 10
    )
    touch_session(conn, cursor.session_id, kind="server", now=world.now)  # cursor's session has connected
    app = create_app(world.db_path, settings_path=tmp_path / "config.toml", clock=lambda: world.now, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, ServiceScreen) and app.screen.loaded, what="tokens")
        screen = app.screen
        assert isinstance(screen, ServiceScreen)
        assert [(t.label, t.scopes.text()) for t in screen.entries] == [
            ("cursor", "tier:write folder:drafts"),
            ("gemini", "tier:read vault:notes vault:work"),
        ]
        title = str(screen.query_one("#service-title").render())
        assert "not running" in title and "kms_" not in title
        await pilot.press("p")  # the highlighted row: cursor's session
        await wait_for(pilot, lambda: control.state_of(conn, cursor.session_id)[0] == "paused", what="paused")
        await pilot.press("p")
        await wait_for(pilot, lambda: control.state_of(conn, cursor.session_id)[0] == "active", what="resumed")
        await pilot.press("down")  # gemini: its scopes whole under the table (the cell is cut)
        scopes = screen.query_one("#token-scopes")
        await wait_for(pilot, lambda: "vault:notes vault:work" in str(scopes.render()), what="gemini's scopes")
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await pilot.press("n")
        assert tokens.get(conn, gemini.id).revoked_at is None
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: tokens.get(conn, gemini.id).revoked_at is not None, what="the revoke")
        assert tokens.get(conn, cursor.id).revoked_at is None
        await pilot.press("c")  # a pairing code for remote mode's consent page, usable once
        status = screen.query_one("#service-status")
        await wait_for(pilot, lambda: "pairing code" in str(status.render()), what="the pairing code")
        code = str(status.render()).split("pairing code ")[1].split()[0]
        remote_pairing.use_code(conn, code)
    conn.close()


async def test_pair_a_device_shows_the_review_pages_link_and_its_qr_code(tmp_path: Path) -> None:
    """``d`` on the service screen: a pairing link on remote mode's public origin (a phone never reaches this
    machine's loopback) and its QR code, the link usable once to get a device cookie."""
    world = seed_fixed(tmp_path / "w")
    settings = tmp_path / "config.toml"
    settings.write_text('[remote]\nenabled = true\nurl = "https://box.example.net"\n', encoding="utf-8")
    app = create_app(world.db_path, settings_path=settings, clock=lambda: world.now, poll_interval=0.05)
    async with app.run_test(size=(120, 60)) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, ServiceScreen) and app.screen.loaded, what="tokens")
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen), what="the pairing screen")
        screen = app.screen
        assert isinstance(screen, PairScreen)
        assert screen.link.startswith("https://box.example.net/review/login?t=")
        assert "▄" in str(screen.query_one("#pair-qr").render())  # the code, drawn in half blocks
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, ServiceScreen), what="back to the service screen")
    redeemed = review_access.redeem(connect(world.db_path), screen.link.split("t=")[1], purposes=("pair",))
    assert redeemed is not None and redeemed[1].kind == "device" and redeemed[1].name == "phone"
