"""The kms service's HTTP face: Streamable HTTP on loopback, one bearer token per session.

``service_app(hub, ...)`` is the SDK's own Streamable HTTP app over the same server object stdio uses
(``build_server(hub)``), with:

- a ``TokenVerifier`` that checks every request's bearer token against the database
  (``server.activity.tokens.verify``): unknown, wrong, revoked or expired tokens get 401 at once, an
  admin token never reaches the tools;
- the session a request belongs to taken from its token, never from the client: each token stands for
  one kms session (``SessionHub.for_token``), whose config is the person's settings narrowed by the
  token's scopes (``Scopes.narrow``), so ``tools/list`` shows only what the token allows and the guard
  re-checks tier, vault, allowlist, rate limit and approval on every call;
- ``server.mcp.http_guard.HttpGuard`` around the whole app: on every route, before any work, the exact Host
  and Origin (421, 403), then the token (401), then the body read as it streams within its limit and read
  timeout (413, 408); the SDK's own screen gets the same exact lists (``exact_security``);
- the stdio screen (``server.mcp.wire.screen``: depth, ids, surrogates, invalid UTF-8, shapes the SDK
  drops or crashes on) on every authenticated POST body, so protocol abuse gets a typed JSON-RPC error
  (400) over HTTP too and never reaches the SDK;
- a response still open when its token stops being active (revoked, expired, a lapsed lease) ends within a
  second or two (``EndingResponses``): the bearer check alone runs only when a request arrives;
- ``/review/``: the review pages (``server.web``): a person's browser with a cookie from a one-time link, never a
  bearer token (docs/review.md);
- ``/health``: unauthenticated, says only that kms answers, its version and pid (no secret, no count);
- ``/hooks/{event}``: the HTTP hooks of a ``kms claude`` session (docs/hooks.md), each authenticated by the
  session's own bearer token (the same check as ``/mcp``), and only a ``session`` token's: a session-end
  hook writes the session note into the vault, which a host's token (any tier, e.g. ``tier:read``) was
  never given (403). The session is the token's, never one the event names. The
  rules are ``server.writes.hook_events.handle``; an event kms cannot take is answered 200 with nothing
  (a hook never stops the host) and logged.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from server import installed_version
from server.activity import review_access, tokens
from server.errors import KmsError
from server.mcp.http_guard import (
    MAX_BODY_BYTES,
    READ_TIMEOUT_S,
    HttpGuard,
    OncePerRequest,
    Origins,
    bearer,
    exact_security,
    replay,
    typed_errors,
)
from server.mcp.serve import build_server
from server.mcp.wire import screen
from server.store.db import thread_connection
from server.web import review_mount
from server.writes.hook_events import EVENTS, handle

if TYPE_CHECKING:
    from server.mcp.hub import SessionHub

log = logging.getLogger("kms.service")


class KmsTokenVerifier:
    """The SDK's ``TokenVerifier`` over kms's token table (one indexed lookup per request)."""

    def __init__(self, hub: SessionHub) -> None:
        self.hub = hub

    async def verify_token(self, token: str) -> Any:

        db = self.hub.services.db_path
        now = time.time()
        found = tokens.verify(thread_connection(db), token, now=now, touch=False)  # one indexed read: inline
        if found is None or found.scopes.admin or found.kind == "remote":  # a remote grant: its listener only
            return None
        if tokens.touch_due(found, now):  # a write (at most every 30 s a token): off the event loop
            await anyio.to_thread.run_sync(lambda: tokens.mark_used(thread_connection(db), found.id, now))
        return AccessToken(
            token="",
            client_id=found.id,
            scopes=[],
            subject=found.session_id,
            expires_at=int(found.expires_at) if found.expires_at is not None else None,
        )


class ScreenedBodies:
    """ASGI wrapper of the ``/mcp`` endpoint: an authenticated POST whose body the stdio screen refuses is
    answered here (400, the JSON-RPC error); anything else goes on unchanged, its body replayed. An
    unauthenticated request goes straight on (401 first), as does one over the body limit (413)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        user = scope.get("user")
        if scope.get("type") != "http" or scope.get("method") != "POST" or not getattr(user, "is_authenticated", False):
            await self.app(scope, receive, send)
            return
        length = next((int(v) for k, v in scope.get("headers", []) if k == b"content-length" and v.isdigit()), 0)
        if length > MAX_BODY_BYTES:
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_BODY_BYTES:
                break
        if len(body) <= MAX_BODY_BYTES:
            _msg, refusal = screen(body)
            if refusal is not None:
                log.info("refused an HTTP message: %s", refusal.reason)
                reply = refusal.reply or b""
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400 if reply else 202,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(reply)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": reply})
                return
        await self.app(scope, replay([{"type": "http.request", "body": body, "more_body": False}], receive), send)


STREAM_CHECK_S = 0.5  # how often a response still open re-checks its token (revoked or lapsed: it ends)
ENDING_GRACE_S = 1.0  # how long an ending response may take to wind down before it is cut
CHECKER_IDLE_S = 30.0  # the checker thread ends after this long with no response open (started again on demand)


class OpenResponse:
    """One response of ``EndingResponses`` still being answered: its token, when it began, and the two ways it is
    ended from the checker thread (told its client left, then cut)."""

    def __init__(self, token_id: str) -> None:
        self.token_id = token_id
        self.began = time.monotonic()
        self.ended = anyio.Event()  # set: its receive answers ``http.disconnect``
        self.cut = anyio.CancelScope()  # cancelled: the app is stopped where it is
        self.loop = anyio.lowlevel.current_token()
        self.ended_at: float | None = None
        self.receiving: set[anyio.CancelScope] = set()  # the app's waits for its client (a disconnect)

    def end(self) -> None:  # on the event loop
        self.ended.set()
        for waiting in self.receiving:
            waiting.cancel()

    def stop(self) -> None:  # on the event loop
        self.cut.cancel()


class EndingResponses:
    """ASGI wrapper of the ``/mcp`` endpoint: a response still open when its token stops being active (revoked
    by ``kms token revoke``, expired, a lapsed ``kms claude`` lease) ends within ``STREAM_CHECK_S`` (and
    ``ENDING_GRACE_S``). The bearer check runs only when a request arrives, so without this an event stream
    (the GET stream, a POST answered as SSE) opened before would go on serving a token kms no longer honours.

    The response is told its client left (``http.disconnect``, the way the SDK and sse-starlette already end a
    stream), then cut if it has not ended after the grace; an event stream is closed cleanly (its last, empty
    chunk).

    Why a thread: a request costs an entry in a set here, no task. One checker thread per app, started when a
    response is open and ended after ``CHECKER_IDLE_S`` with none, re-checks the tokens of the responses open
    longer than one check (one indexed read each) and reaches into the event loop only to end one. A request
    shorter than one check never reads the database here."""

    def __init__(self, app: Any, db_path: Any) -> None:
        self.app = app
        self.db_path = db_path
        self.open: set[OpenResponse] = set()
        self.lock = threading.Lock()
        self.checker: threading.Thread | None = None

    def _active(self, token_id: str) -> bool:
        try:  # one indexed read, on the checker thread
            return tokens.get(thread_connection(self.db_path), token_id).state(time.time()) == "active"
        except KmsError:
            return False

    def _check(self) -> None:
        """The checker thread: every ``STREAM_CHECK_S``, end the open responses whose token is no longer active,
        and cut those told more than ``ENDING_GRACE_S`` ago."""
        idle_since = time.monotonic()
        while True:
            time.sleep(STREAM_CHECK_S)  # the wait is the checker's period
            now = time.monotonic()
            with self.lock:
                due = [r for r in self.open if now - r.began >= STREAM_CHECK_S]
                if not self.open and now - idle_since >= CHECKER_IDLE_S:
                    self.checker = None
                    return
                if self.open:
                    idle_since = now
            states: dict[str, bool] = {}
            for response in due:
                if response.ended_at is None:
                    if not states.setdefault(response.token_id, self._active(response.token_id)):
                        log.info("token %s is no longer active: its open response ends", response.token_id)
                        response.ended_at = now
                        self._on_loop(response, response.end)
                elif now - response.ended_at >= ENDING_GRACE_S:
                    self._on_loop(response, response.stop)

    @staticmethod
    def _on_loop(response: OpenResponse, step: Any) -> None:
        try:
            anyio.from_thread.run_sync(step, token=response.loop)
        except RuntimeError:  # its event loop has closed: nothing is left to end
            pass

    def _track(self, response: OpenResponse) -> None:
        with self.lock:
            self.open.add(response)
            if self.checker is None:
                self.checker = threading.Thread(target=self._check, name="kms-ending-responses", daemon=True)
                self.checker.start()

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        token_id = getattr(getattr(scope.get("user"), "access_token", None), "client_id", None)
        if scope.get("type") != "http" or not isinstance(token_id, str):
            await self.app(scope, receive, send)
            return
        response = OpenResponse(token_id)
        started = done = False
        first = True

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal started, done
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                done = True
            await send(message)

        async def ending_receive() -> dict[str, Any]:
            nonlocal first
            if first:  # the body, read whole by HttpGuard and replayed: it never waits
                first = False
                return await receive()
            if not response.ended.is_set():
                with anyio.CancelScope() as waiting:  # cancelled by ``end``: the client "left"
                    response.receiving.add(waiting)
                    try:
                        return await receive()
                    finally:
                        response.receiving.discard(waiting)
            return {"type": "http.disconnect"}

        self._track(response)
        try:
            with response.cut:
                await self.app(scope, ending_receive, tracked_send)
        finally:
            with self.lock:
                self.open.discard(response)
        if response.ended.is_set() and not done:
            if started:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})


def hook_answer(hub: SessionHub, event_arg: str, presented: str, body: bytes) -> tuple[int, dict[str, Any] | None]:
    """(status, answer) of one hook request: 401 for a token that is not an active session token, 404 for an
    event kms does not take, else 200 and what the host should read (None: nothing). Runs off the loop."""

    conn = thread_connection(hub.services.db_path)
    token = tokens.verify(conn, presented)
    if token is None or token.scopes.admin:
        return 401, {"error": "unauthorized"}
    if token.kind != "session":  # only kms claude's own session may have kms write its session note
        return 403, {"error": "forbidden", "message": "hooks take only the token of a kms claude session"}
    if event_arg not in EVENTS:
        return 404, {"error": "not-found"}
    try:
        event = json.loads(body or b"{}")
        if not isinstance(event, dict):
            raise ValueError("the event is not a JSON object")
        event.setdefault("hook_event_name", EVENTS[event_arg])
        runner = hub.for_token(token)
        runner.session.reads.flush()  # what the session read until now is in the note it may write
        return 200, handle(conn, runner.config, event)
    except Exception:
        log.exception("hook %s of session %s not taken", event_arg, token.session_id)
        return 200, None


def service_app(
    hub: SessionHub, *, host: str = "127.0.0.1", port: int = 0, read_timeout: float = READ_TIMEOUT_S
) -> HttpGuard:
    """The ASGI app of the service: ``/mcp`` (Streamable HTTP, bearer tokens), ``/health`` and ``/hooks``, behind
    ``HttpGuard`` (Host, Origin, token, body limits and read timeouts: ``server.mcp.http_guard``). ``port``: the
    bound port, the only one a Host header may name."""

    origins = Origins.for_bind(host, port)

    async def health(request: Request) -> Response:
        return JSONResponse({"kms": True, "version": installed_version() or "0", "pid": os.getpid()})

    async def hook(request: Request) -> Response:
        body = await request.body()  # within its limit: the guard has read it
        event_arg, presented = request.path_params["event"], bearer(request.headers.get("authorization"))
        status, answer = await anyio.to_thread.run_sync(lambda: hook_answer(hub, event_arg, presented, body))
        return Response(status_code=status) if answer is None else JSONResponse(answer, status_code=status)

    server = build_server(hub)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port or 1}"
    auth = AuthSettings(issuer_url=AnyHttpUrl(url), resource_server_url=None)  # kms issues its own tokens: no OAuth
    verifier = OncePerRequest(KmsTokenVerifier(hub))  # checked by HttpGuard, then by the SDK: read once
    app = server.streamable_http_app(
        host=host,
        token_verifier=verifier,
        auth=auth,
        max_request_body_size=MAX_BODY_BYTES,
        transport_security=exact_security(origins),
        custom_starlette_routes=[Route("/health", health), Route("/hooks/{event}", hook, methods=["POST"])],
    )
    app.router.routes.append(review_mount(public=False, db_path=hub.services.db_path))  # the review pages
    if port:  # the sessions opened here name them in a staged call's answer (``SessionConfig.review_url``)
        hub.pages = review_access.pages_url(url)
    for route in app.routes:
        if isinstance(route, Route) and route.path == "/mcp":
            route.app = ScreenedBodies(EndingResponses(route.app, hub.services.db_path))
    typed_errors(app)

    async def live(token: str) -> bool:
        return await verifier.verify_token(token) is not None

    async def why(token: str) -> str:
        return tokens.refusal(thread_connection(hub.services.db_path), token)  # one indexed read, refusals only

    return HttpGuard(app, origins=origins, verify=live, read_timeout=read_timeout, why=why)
