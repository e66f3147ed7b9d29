"""Paired devices: the public origin's pages (``review_routes(public=True)``) open for a device paired through a
one-time pairing link only: never for a ``kms review`` login link or this machine's browser session. A device's
cookie lasts 30 days, is named, listed with the tokens and by ``kms review devices``, and revocable from the page
or the command line."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import kms, ok
from support.review import client, make_world, post, signed_in

from server.activity import review_access
from server.store.db import connect
from server.web.security import COOKIE


def test_the_public_origin_takes_a_pairing_link_only(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    public = client(world.env.db_path, public=True)
    login = review_access.create_link(world.env.conn, "login")
    assert public.get(f"/review/login?t={login}").status_code == 401  # a login link is for this machine
    local = signed_in(world.env.db_path)  # this machine's browser session...
    public.cookies.set(COOKIE, local.cookies.get(COOKIE) or "", path="/review/")
    assert public.get("/review/").status_code == 401  # ...opens nothing on the public origin
    asked = client(world.env.db_path, public=True).get("/review/pending/7")  # an address a staged answer named
    assert asked.status_code == 401 and "kms review pair" in asked.text and "/review/pending/7" in asked.text
    pair = review_access.create_link(world.env.conn, "pair", name="Ann's <phone>")
    phone = client(world.env.db_path, public=True)
    got = phone.get(f"/review/login?t={pair}")
    assert got.status_code == 200
    assert f"Max-Age={int(review_access.DEVICE_S)}" in got.headers["set-cookie"]
    assert "; Secure" in got.headers["set-cookie"]  # the public origin is https to the browser, whatever the proxy
    assert phone.get("/review/").status_code == 200
    assert client(world.env.db_path, public=True).get(f"/review/login?t={pair}").status_code == 401  # used
    other = client(world.env.db_path, public=True)  # the device's cookie, carried the way the browser's was above
    other.cookies.set(COOKIE, phone.cookies.get(COOKIE) or "", path="/review/")
    assert other.get("/review/").status_code == 200
    page = phone.get("/review/tokens").text
    assert "Ann&#39;s &lt;phone&gt;" in page and "(this one)" in page


def test_a_device_revoked_on_the_tokens_page_is_refused_at_once(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    phone = signed_in(world.env.db_path, public=True, name="phone")
    laptop = signed_in(world.env.db_path)
    [device] = review_access.devices(world.env.conn)
    assert post(laptop, f"/review/devices/{device.id}/revoke").status_code == 303
    assert phone.get("/review/").status_code == 401
    assert review_access.devices(world.env.conn) == []
    assert review_access.devices(world.env.conn, include_ended=True)[0].state(0) == "revoked"


def test_kms_review_pair_shows_a_qr_code_and_a_link_the_device_opens(db_path: Path) -> None:
    connect(db_path)
    shown = ok(kms("review", "pair", "--origin", "https://notes.example", "--name", "phone")).output
    assert "▀" in shown or "█" in shown  # the QR code, drawn in the terminal
    assert "https://notes.example/review/login?t=" in shown
    made = json.loads(ok(kms("review", "pair", "--origin", "https://notes.example/", "--json")).output)
    link = made["link"]
    assert link.startswith("https://notes.example/review/login?t=") and made["name"] == "phone"
    phone = client(db_path, public=True)
    assert phone.get("/review/login?t=" + link.split("?t=", 1)[1]).status_code == 200
    [listed] = json.loads(ok(kms("review", "devices", "--json")).output)
    assert listed["name"] == "phone" and listed["state"] == "active"
    assert "phone" in ok(kms("review", "devices")).output
    ok(kms("review", "revoke", listed["id"]))
    assert phone.get("/review/").status_code == 401
    assert json.loads(ok(kms("review", "devices", "--json")).output) == []


def test_kms_review_without_a_running_service_says_how_to_start_it(db_path: Path) -> None:
    connect(db_path)
    got = kms("review", "--print")
    assert got.exit_code != 0 and "kms service start" in got.output
