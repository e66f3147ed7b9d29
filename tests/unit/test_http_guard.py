"""``server.mcp.http_guard`` in process: a real Starlette app behind the real guard, spoken to by httpx.

The order of the checks (Host and Origin before the token is even looked at, the token before the body) and a
route's unexpected error answered as a typed JSON error, not a traceback. Real sockets, timeouts and the whole
service: tests/mcp/test_service_http_limits.py.
"""

from __future__ import annotations

from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from server.mcp.http_guard import MAX_OPEN_BODY_BYTES, HttpGuard, Origins, exact_security, typed_errors

PORT = 8765


def guarded(seen: list[str]) -> HttpGuard:
    async def fine(request: Request) -> Response:
        return JSONResponse({"ok": True, "bytes": len(await request.body())})

    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug in a route")

    app = Starlette(routes=[Route("/health", fine), Route("/mcp", fine, methods=["POST"]), Route("/hooks/x", broken)])
    typed_errors(app)

    async def verify(token: str) -> bool:
        seen.append(token)
        return token == "good"

    return HttpGuard(app, origins=Origins.for_bind("127.0.0.1", PORT), verify=verify)


async def ask(app: Any, method: str, path: str, **kw: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://127.0.0.1:{PORT}") as client:
        return await client.request(method, path, **kw)


async def test_host_and_origin_are_checked_before_the_token_and_the_token_before_the_body() -> None:
    seen: list[str] = []
    app = guarded(seen)
    good = {"Authorization": "Bearer good"}
    for host in (f"127.0.0.1:{PORT}.evil.example", f"127.0.0.1:{PORT}0", "127.0.0.1", f"evil.example:{PORT}"):
        answer = await ask(app, "POST", "/mcp", headers={**good, "Host": host}, content=b"{}")
        assert (answer.status_code, answer.json()["error"]) == (421, "misdirected"), host
    for origin in (f"http://127.0.0.1:{PORT}@evil.example", f"http://[::1]:{PORT}.evil", "file://", "null"):
        answer = await ask(app, "POST", "/mcp", headers={**good, "Origin": origin}, content=b"{}")
        assert (answer.status_code, answer.json()["error"]) == (403, "forbidden-origin"), origin
    assert seen == [], "a token was looked up for a request that names another host or origin"
    answer = await ask(app, "POST", "/mcp", headers={"Authorization": "Bearer bad"}, content=b"x" * 100)
    assert (answer.status_code, answer.json()["error"]) == (401, "unauthorized") and seen == ["bad"]
    for headers in ({"Host": f"localhost:{PORT}"}, {"Host": f"[::1]:{PORT}", "Origin": f"http://[::1]:{PORT}"}):
        answer = await ask(app, "POST", "/mcp", headers={**good, **headers}, content=b"x" * 100)
        assert answer.json() == {"ok": True, "bytes": 100}, headers
    too_big = await ask(app, "GET", "/health", content=b"x" * (MAX_OPEN_BODY_BYTES + 1))
    assert (too_big.status_code, too_big.json()["error"]) == (413, "too-large")


async def test_an_error_in_a_route_is_a_typed_json_answer() -> None:
    app = guarded([])
    broken = await ask(app, "GET", "/hooks/x", headers={"Authorization": "Bearer good"})
    assert broken.status_code == 500 and broken.json()["error"] == "internal"
    assert "Traceback" not in broken.text and "a bug in a route" not in broken.text
    wrong = await ask(app, "GET", "/mcp", headers={"Authorization": "Bearer good"})
    assert wrong.status_code == 405 and wrong.json()["error"] == "method-not-allowed"
    assert wrong.headers["allow"] == "POST"


def test_the_sdk_screen_gets_exact_lists_never_wildcards() -> None:
    settings = exact_security(Origins.for_bind("127.0.0.1", PORT))
    assert set(settings.allowed_hosts) == {f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}"}
    assert not any("*" in value for value in [*settings.allowed_hosts, *settings.allowed_origins])
    assert Origins.for_bind("192.168.1.5", PORT) is None and exact_security(None) is None
