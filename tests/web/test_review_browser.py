"""The review pages in a real browser: the system's Chromium (``/usr/bin/chromium``, scripts/test.sh installs it)
driven by Playwright, against a real ``kms serve`` subprocess and a real MCP client whose writes wait for the
person (a token with the ``approval`` scope).

The person opens a one-time link, sees a write staged by the agent appear without reloading, approves it and
finds it in the vault, rejects another (the agent is told), and undoes the session; at a desktop width (1280 px)
and a phone's (390 px: nothing wider than the screen; the ``a`` key approves). The screenshots of
docs/review.md are taken here (``REVIEW_SCREENSHOTS=1`` writes them into docs/screenshots/).
"""

from __future__ import annotations

import asyncio
import os
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.service import Served, call, kms_env, run_kms, wait_for

from server.activity import tokens
from server.config.scopes import Scopes
from server.store.db import scalar

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
NOTE = "projects/Lisbon trip.md"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


class AgentCall:
    """One tool call of a real MCP client on a thread of its own: it waits there while the person decides."""

    def __init__(self, url: str, secret: str, tool: str, arguments: dict[str, Any]) -> None:
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(url, secret, tool, arguments), daemon=True)
        self.thread.start()

    def _run(self, url: str, secret: str, tool: str, arguments: dict[str, Any]) -> None:
        try:
            self.result = asyncio.run(call(url, secret, tool, arguments))
        except BaseException as e:  # the test reads it
            self.error = e

    def done(self, timeout: float = 30.0) -> dict[str, Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the agent's call did not end"
        assert self.error is None, self.error
        assert self.result is not None
        return self.result


@pytest.fixture
def served(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "config.toml").write_text("[agent]\nwrite = true\nedit = true\n")
    s = Served.start(db_path)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail("no /usr/bin/chromium: scripts/test.sh installs Debian's chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def note_id(conn: apsw.Connection, path: str) -> str:
    return str(scalar(conn, "SELECT id FROM notes WHERE path = ?", (path,)))


def shot(page: Any, name: str) -> None:
    if os.environ.get("REVIEW_SCREENSHOTS"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / name), full_page=True)


def sign_in(browser: Any, served: Served, width: int, height: int, *, javascript: bool = True) -> Any:
    """A new browser window opening the link `kms review --print` gives (as `kms review` opens it)."""
    context = browser.new_context(viewport={"width": width, "height": height}, java_script_enabled=javascript)
    page = context.new_page()
    link = run_kms("review", "--print").stdout.strip()
    assert link.startswith(f"http://127.0.0.1:{served.port}/review/login?t="), link
    page.goto(link)
    page.wait_for_url(f"http://127.0.0.1:{served.port}/review/")
    assert page.locator("h1").inner_text() == "Waiting for you"
    return page


def test_a_person_reviews_an_agents_writes_in_a_real_browser(
    browser: Any, served: Served, indexed: apsw.Connection, vault_dir: Path
) -> None:
    _token, secret = tokens.create(indexed, label="host:agent", scopes=Scopes.parse("tier:write approval"))
    target = vault_dir / NOTE
    original = target.read_bytes()
    nid = note_id(indexed, NOTE)
    page = sign_in(browser, served, 1280, 900)
    page.evaluate("window.kmsNoReload = true")  # gone if the page reloads

    # a write staged by the agent appears without a reload, within 2 s
    first = AgentCall(served.url, secret, "kms_append", {"noteId": nid, "content": "- decided: ship on Friday"})
    page.locator("article.item").first.wait_for(timeout=15_000)  # the agent's call reaches the queue...
    appeared = page.evaluate("Date.now()")
    pending_id = int(page.locator("article.item").first.get_attribute("data-pending") or 0)
    staged_at = float(scalar(indexed, "SELECT created_at FROM pending_writes WHERE id = ?", (pending_id,)))
    assert appeared / 1000 - staged_at <= 2.5  # ...and the page within 2 s of its staging (the poll: every 1 s)
    assert page.evaluate("window.kmsNoReload") is True
    assert "decided: ship on Friday" in page.locator("article.item").first.inner_text()
    shot(page, "review-queue.png")

    # its own page: the diff, side by side
    page.click(f"a[href='/review/pending/{pending_id}']")
    page.locator("table.side").wait_for()
    shot(page, "review-item-diff.png")
    page.click("button.ok")  # approve
    page.wait_for_url(lambda u: f"/review/pending/{pending_id}?done=approved" in u)
    assert "error" not in first.done(), first.result
    wait_for(lambda: b"decided: ship on Friday" in target.read_bytes(), 10, "the approved write in the vault")

    # another: rejected with a reason, the agent is told
    page.goto(f"http://127.0.0.1:{served.port}/review/")
    second = AgentCall(served.url, secret, "kms_append", {"noteId": nid, "content": "- rm -rf the plan"})
    page.locator("article.item").first.wait_for(timeout=15_000)
    page.fill("form.reject input[name=reason]", "not this one")
    page.click("form.reject button")
    page.wait_for_url(lambda u: "/review/?done=rejected" in u)
    assert "Rejected #" in page.locator(".said").inner_text()
    said = second.done()
    assert "rm -rf" not in target.read_bytes().decode()
    assert said.get("error") == "rejected" or "rejected" in str(said), said

    # the session: what it changed, undone in one action
    sid = scalar(indexed, "SELECT session_id FROM pending_writes WHERE id = ?", (pending_id,))
    page.goto(f"http://127.0.0.1:{served.port}/review/sessions/{sid}")
    assert NOTE in page.locator("main").inner_text()
    shot(page, "review-session.png")
    page.click("form[action$='/undo'] button")
    page.wait_for_url(lambda u: "done=undone" in u)
    wait_for(lambda: target.read_bytes() == original, 10, "the session's write undone")

    # a phone: readable at 390 px, the `a` key approves
    phone = sign_in(browser, served, 390, 844)
    third = AgentCall(served.url, secret, "kms_append", {"noteId": nid, "content": "- from the phone"})
    phone.locator("article.item").first.wait_for(timeout=15_000)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    shot(phone, "review-phone.png")
    phone.keyboard.press("a")
    phone.wait_for_url(lambda u: "done=approved" in u)
    third.done()
    wait_for(lambda: b"- from the phone" in target.read_bytes(), 10, "the write approved from the phone")


def test_with_javascript_off_the_forms_still_decide(
    browser: Any, served: Served, indexed: apsw.Connection, vault_dir: Path
) -> None:
    _token, secret = tokens.create(indexed, label="host:agent", scopes=Scopes.parse("tier:write approval"))
    nid = note_id(indexed, NOTE)
    agent = AgentCall(served.url, secret, "kms_append", {"noteId": nid, "content": "- approved without scripts"})
    wait_for(
        lambda: scalar(indexed, "SELECT count(*) FROM pending_writes WHERE status = 'pending'"), 15, "a staged call"
    )
    page = sign_in(browser, served, 1280, 900, javascript=False)
    page.locator("article.item").first.wait_for()
    page.click("form.approve button")
    page.wait_for_url(lambda u: "done=approved" in u)
    assert "Approved #" in page.locator(".said").inner_text()
    agent.done()
    wait_for(lambda: b"- approved without scripts" in (vault_dir / NOTE).read_bytes(), 10, "the write in the vault")


def test_kms_review_without_a_desktop_prints_the_link_instead_of_starting_a_text_browser(served: Served) -> None:
    env = {k: v for k, v in kms_env().items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    got = run_kms("review", env=env)
    assert got.returncode == 0, got.stderr
    link = got.stdout.split()[0]
    assert link.startswith(f"http://127.0.0.1:{served.port}/review/login?t=") and "no browser to open" in got.stdout
    with urllib.request.urlopen(link, timeout=10) as answer:  # noqa: S310 - the service on loopback
        assert answer.status == 200 and "kms_review=" in (answer.headers.get("set-cookie") or "")
