"""The review pages under test: a real vault and database, calls staged through the real write guard, and a
Starlette ``TestClient`` signed in through a real one-time link (``signed_in``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.testclient import TestClient

from server.activity import review_access
from server.mcp.tools import REGISTRY
from server.web import review_mount
from server.web.security import COOKIE
from support.writes import Env, make_env, write_service

ORIGIN = "http://testserver"
SESSION = "sreview000001"
OTHER = "sreview000002"


@dataclass
class World:
    env: Env
    writes: dict[str, Any]  # session id -> its write guard (approval "always")

    def guard(self, session_id: str = SESSION) -> Any:
        if session_id not in self.writes:
            self.writes[session_id] = write_service(self.env.db_path, session_id, approval="always")
        return self.writes[session_id]

    def stage(self, tool: str, arguments: dict[str, Any], session_id: str = SESSION) -> Any:
        """A call staged for the person by the real guard (it waits until someone decides); its ``Staged``."""
        spec = next(s for s in REGISTRY if s.name == tool)
        staged = self.guard(session_id).stage(spec, arguments)
        assert staged is not None
        return staged

    def settle(self, tool: str, arguments: dict[str, Any], staged: Any, session_id: str = SESSION) -> dict[str, Any]:
        """What the waiting call does once decided (``WriteService.settle``, as the MCP adapter does)."""
        spec = next(s for s in REGISTRY if s.name == tool)
        guard = self.guard(session_id)
        decision = guard.decision(staged)
        assert decision is not None
        return guard.settle(spec, arguments, staged, decision)


def make_world(tmp_path: Path) -> World:
    """A vault with one note, and the session ``SESSION`` recorded as a launcher's would be."""
    from server.activity.session_registry import start_session

    env = make_env(tmp_path)
    env.note("inbox/Plan.md", "# Plan\n\nfirst line\n")
    start_session(env.conn, kind="launcher", session_id=SESSION, vault="v")
    return World(env, {})


def app(db_path: Path, *, public: bool = False) -> Starlette:
    return Starlette(routes=[review_mount(public=public, db_path=db_path)])


def client(db_path: Path, *, public: bool = False) -> TestClient:
    """The public origin is https to a browser (its cookie is Secure); this machine's service is http."""
    base = "https://testserver" if public else "http://testserver"
    return TestClient(app(db_path, public=public), base_url=base, follow_redirects=False)


def signed_in(db_path: Path, *, public: bool = False, purpose: str = "login", name: str | None = None) -> TestClient:
    """A client that opened a fresh one-time link (a pairing one for ``public``)."""
    from server.store.db import connect

    c = client(db_path, public=public)
    secret = review_access.create_link(connect(db_path), "pair" if public else purpose, name=name)
    got = c.get(f"/review/login?t={secret}")
    assert got.status_code == 200, got.text
    assert c.cookies.get(COOKIE)
    return c


def csrf(c: TestClient) -> str:
    return review_access.csrf_token(c.cookies.get(COOKIE) or "")


def post(c: TestClient, path: str, data: dict[str, Any] | None = None, *, origin: str | None = "") -> Any:
    """A form POST as a browser sends it: its Origin (the client's own unless given; None: none), the session's
    CSRF token."""
    if origin == "":
        origin = str(c.base_url).rstrip("/")
    headers = {"origin": origin} if origin else {}
    return c.post(path, data={"csrf": csrf(c), **(data or {})}, headers=headers)
