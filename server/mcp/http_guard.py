"""The service's HTTP limits, checked before any work: one home for every limit and timeout of ``kms serve``.

Every request, on every route (``/mcp``, ``/hooks/{event}``, ``/health``, and any path that does not exist), goes
through ``HttpGuard`` before the app sees it, in this order, each step answered with a typed JSON error
(``{"error": kind, "message": ...}``) and ``Connection: close``:

1. **Host and Origin, exactly** (a loopback service only, as the SDK does): the Host header must be one of
   ``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT`` (PORT: the service's own, bound port) or 421
   ``misdirected``; an Origin, when there is one, must be ``http://`` and one of those or 403
   ``forbidden-origin``. No Origin is allowed (hosts and ``curl`` send none; a browser always sends one).
   The SDK's own screen (``mcp.server.transport_security``) matches its ``host:*`` wildcards by prefix, so
   ``127.0.0.1:8765.evil.example`` and ``http://127.0.0.1:8765@evil.example`` would pass it; kms gives it the
   same exact lists (``exact_security``), never wildcards, and checks them here itself first.
2. **The token** (``/mcp`` and ``/hooks/``): a bearer token that is a live, non-admin kms token, or 401
   ``unauthorized`` -- before a byte of the body is read.
3. **The body, as it streams**: a Content-Length over the route's limit is 413 ``too-large`` before anything
   is read; otherwise bytes are counted chunk by chunk from ``receive()`` and the request is refused (413)
   the moment the count passes the limit, so a 200 MB upload never sits in memory. Routes without a token
   take at most ``MAX_OPEN_BODY_BYTES`` (``/health`` needs none), the review pages' forms
   ``MAX_FORM_BODY_BYTES``. The body is then replayed to the app.
4. **Slow requests**: each chunk of the body must come within ``read_timeout_s`` of the previous one and the
   whole body within ``BODY_DEADLINE_FACTOR`` times that, or 408 ``timeout``. The request head (request
   line and headers) is the HTTP protocol's, before any ASGI app runs: ``guarded_protocol`` gives uvicorn's
   httptools protocol a deadline (the head must be complete within ``read_timeout_s`` of the connection or
   of the previous answer, else 408 and close; an idle connection is closed too) and a size limit
   (``MAX_HEAD_BYTES``, else 431). uvicorn itself only has ``timeout_keep_alive`` (idle time after an
   answer; disarmed by a single byte) and, for h11 only, ``h11_max_incomplete_event_size``.

Not covered: the number of connections (``limit_concurrency`` is not set: every session holds a stream open,
and a local client that can open sockets can already use the machine); a client that reads its answer
slowly (the kernel's send buffer and uvicorn's flow control bound the memory); a service bound to a
non-loopback host (``--allow-remote``) has no Host/Origin screen, as the SDK does there.

``KMS_SERVICE_READ_TIMEOUT`` (seconds, default ``READ_TIMEOUT_S``) changes the read timeout; tests shorten it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from server.config.env_names import read_timeout_value

log = logging.getLogger("kms.service")

LOOPBACK = ("127.0.0.1", "::1", "localhost")
MAX_BODY_BYTES = 16 * 1024 * 1024  # a request to /mcp or /hooks: as the stdio screen's line limit (server.mcp.wire)
MAX_OPEN_BODY_BYTES = 4 * 1024  # a route that takes no token (/health, unknown paths) takes no real body
MAX_FORM_BODY_BYTES = 64 * 1024  # a form of the review pages (/review/...: a reason, the ids of a session's calls)
FORM_PATHS = ("/review/",)  # routes that take a person's forms (server.web: a cookie and a CSRF token, no bearer)
MAX_HEAD_BYTES = 64 * 1024  # request line and headers together
READ_TIMEOUT_S = 10.0  # the head, and each chunk of a body; KMS_SERVICE_READ_TIMEOUT changes it
BODY_DEADLINE_FACTOR = 6  # the whole body: within this many read timeouts
KEEP_ALIVE_S = 5  # an idle connection after an answer (uvicorn's timeout_keep_alive)
READ_TIMEOUT_ENV = "KMS_SERVICE_READ_TIMEOUT"
TOKEN_PATHS = ("/mcp", "/hooks/")  # routes that take a bearer token (and a body up to MAX_BODY_BYTES)

SLOW_HEAD = "the request head came too slowly (KMS_SERVICE_READ_TIMEOUT)"
BIG_HEAD = f"the request head is over {MAX_HEAD_BYTES} bytes (the limit)"
INTERNAL = "kms could not answer this request (see the service log)"

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Verify = Callable[[str], Awaitable[bool]]  # a presented token -> whether it is a live, non-admin kms token
Why = Callable[[str], Awaitable[str]]  # a refused token -> the reason its 401 gives


class TokenVerifier(Protocol):
    """The SDK's ``TokenVerifier`` shape: a presented token -> its ``AccessToken`` (None: refused)."""

    async def verify_token(self, token: str) -> Any: ...


VERIFIED: ContextVar[tuple[str, Any] | None] = ContextVar("kms_verified_token", default=None)


class OncePerRequest:
    """A ``TokenVerifier`` that checks a token once per request. ``HttpGuard`` checks the token before any work
    and the SDK's bearer middleware checks it again a few microseconds later, in the same request: the second
    check takes the first's answer instead of reading the database again. The answer is kept in a context
    variable that ``HttpGuard`` clears at the start and end of every request, keyed by the exact token, so it
    never outlives the request or serves another token."""

    def __init__(self, verifier: TokenVerifier) -> None:
        self.verifier = verifier

    async def verify_token(self, token: str) -> Any:
        known = VERIFIED.get()
        if known is not None and known[0] == token:
            return known[1]
        found = await self.verifier.verify_token(token)
        if found is not None:
            VERIFIED.set((token, found))
        return found


def read_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """The read timeout ``KMS_SERVICE_READ_TIMEOUT`` sets (``check_env`` refuses a bad value at start)."""
    raw = (os.environ if env is None else env).get(READ_TIMEOUT_ENV, "").strip()
    return (read_timeout_value(raw) if raw else None) or READ_TIMEOUT_S


def error_body(kind: str, message: str) -> bytes:
    return json.dumps({"error": kind, "message": message}).encode()


async def refuse(send: Send, status: int, kind: str, message: str, *extra: tuple[bytes, bytes]) -> None:
    """Answer with a typed JSON error and close the connection (whatever of the request is unread is dropped)."""
    body = error_body(kind, message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def bearer(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer ...`` header ('' for none or another scheme)."""
    scheme, _sep, value = (authorization or "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


@dataclass(frozen=True)
class Origins:
    """The exact Host values and Origins a loopback service answers (None: a non-loopback bind, no screen)."""

    hosts: frozenset[str]
    origins: frozenset[str]

    @classmethod
    def for_bind(cls, host: str, port: int) -> Origins | None:
        if host not in LOOPBACK:
            return None
        names = ("127.0.0.1", "localhost", "[::1]")
        hosts = frozenset(f"{name}:{port}" for name in names)
        return cls(hosts, frozenset(f"http://{h}" for h in hosts))

    def refusal(self, hosts: list[str], origins: list[str]) -> tuple[int, str, str] | None:
        """(status, kind, message) for a Host or Origin this service must not answer; None when both are fine.
        Exact, case-insensitive comparison of the whole value: no prefix, no wildcard, one header of each."""
        if len(hosts) != 1 or hosts[0].strip().lower() not in self.hosts:
            return 421, "misdirected", "the Host header does not name this kms service (loopback, its own port)"
        if len(origins) > 1 or (origins and origins[0].strip().lower() not in self.origins):
            return 403, "forbidden-origin", "requests from this Origin are not served (only this kms service's own)"
        return None


def exact_security(origins: Origins | None) -> Any:
    """The SDK's ``TransportSecuritySettings`` with the same exact lists (its ``:*`` wildcards match by prefix):
    its own check on ``/mcp`` then agrees with ``HttpGuard``'s. None: the SDK's screen is off, as for a remote bind."""
    # deferred: the SDK only in the service process; kms service commands import this module (LOOPBACK)
    from mcp.server.transport_security import TransportSecuritySettings

    if origins is None:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(origins.hosts),
        allowed_origins=sorted(origins.origins),
    )


class HttpGuard:
    """ASGI wrapper of the whole service app: Host and Origin, then the token, then the body within its limit
    and timeouts (module docstring), before the app runs. The app gets the body replayed in one message."""

    def __init__(
        self,
        app: Any,
        *,
        origins: Origins | None,
        verify: Verify,
        read_timeout: float = READ_TIMEOUT_S,
        why: Why | None = None,
        challenge: bytes = b'Bearer error="invalid_token"',
        open_limit: int = MAX_OPEN_BODY_BYTES,
    ) -> None:
        self.app = app
        self.origins = origins
        self.verify = verify
        self.why = why  # why a refused token is refused (revoked, expired, unknown), for the 401's message
        self.read_timeout = read_timeout
        self.challenge = challenge  # the 401's WWW-Authenticate (the remote listener's names its metadata)
        self.open_limit = open_limit  # the body limit of routes that take no token (OAuth forms are bodies)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        fresh = VERIFIED.set(None)  # this request's token is checked anew (OncePerRequest)
        try:
            await self._screened(scope, receive, send)
        finally:
            VERIFIED.reset(fresh)

    async def _screened(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        headers: dict[bytes, list[str]] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(name.lower(), []).append(value.decode("latin-1"))
        if self.origins is not None:
            refused = self.origins.refusal(headers.get(b"host", []), headers.get(b"origin", []))
            if refused is not None:
                log.info("refused %s %s: %s", scope.get("method"), scope.get("path"), refused[1])
                await refuse(send, *refused)
                return
        path = str(scope.get("path", ""))
        takes_token = path == TOKEN_PATHS[0] or any(path.startswith(p) for p in TOKEN_PATHS[1:])
        if takes_token:
            presented = bearer(headers.get(b"authorization", [""])[0])
            if not presented or not await self.verify(presented):
                why = await self.why(presented) if presented and self.why is not None else None
                await refuse(
                    send,
                    401,
                    "unauthorized",
                    why or "a live kms bearer token is required (kms token create; kms mcp-config HOST --http)",
                    (b"www-authenticate", self.challenge),
                )
                return
        takes_form = any(path.startswith(p) for p in FORM_PATHS)
        limit = MAX_BODY_BYTES if takes_token else MAX_FORM_BODY_BYTES if takes_form else self.open_limit
        declared = headers.get(b"content-length", ["0"])[0].strip()
        if declared.isdigit() and int(declared) > limit:
            await refuse(send, 413, "too-large", f"the request body is over {limit} bytes (the limit)")
            return
        read = await self._read_body(receive, send, limit)
        if read is None:
            return
        await self.app(scope, replay(read, receive), send)

    async def _read_body(self, receive: Receive, send: Send, limit: int) -> list[Message] | None:
        """The request's messages, the body joined into one (None: refused here, 413 or 408, already answered)."""
        body = bytearray()
        whole = anyio.current_time() + self.read_timeout * BODY_DEADLINE_FACTOR
        with anyio.CancelScope() as deadline:  # one scope, its deadline moved at each chunk
            while True:
                deadline.deadline = min(whole, anyio.current_time() + self.read_timeout)
                message = await receive()
                if message.get("type") != "http.request":  # the client left: the app sees it
                    return [message]
                body += message.get("body", b"")
                if len(body) > limit:
                    break
                if not message.get("more_body", False):
                    return [{"type": "http.request", "body": bytes(body), "more_body": False}]
        if deadline.cancelled_caught:
            log.info("a request body came too slowly: 408")
            await refuse(send, 408, "timeout", "the request body came too slowly (KMS_SERVICE_READ_TIMEOUT)")
        else:
            await refuse(send, 413, "too-large", f"the request body is over {limit} bytes (the limit)")
        return None


def replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` (a body already read) first, then the connection's own: how a screen
    that had to read the body hands the request on."""
    pending = list(messages)

    async def next_message() -> Message:
        return pending.pop(0) if pending else await receive()

    return next_message


def raw_refusal(status: int, reason: str, kind: str, message: str) -> bytes:
    """A whole HTTP/1.1 error answer, for the protocol level (no ASGI app runs there)."""
    body = error_body(kind, message)
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class GuardedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline and a size limit for the request head (module docstring).
    The deadline runs from the connection, or from the previous answer, until the headers are complete; while a
    request is being answered (a long event stream) it does not run."""

    head_timeout_s = READ_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._in_head, self._head_bytes = True, 0
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if getattr(self, "_head_timer", None) is not None:
            self._head_timer.cancel()  # type: ignore[union-attr]
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return  # a request is being answered: its head came in time
        self.transport.write(raw_refusal(408, "Request Timeout", "timeout", SLOW_HEAD))
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self.transport.write(
                raw_refusal(
                    431,
                    "Request Header Fields Too Large",
                    "too-large",
                    BIG_HEAD,
                )
            )
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request it cannot parse, as a typed JSON error like every other."""
        self.transport.write(raw_refusal(400, "Bad Request", "invalid-request", msg))
        self.transport.close()


def uvicorn_options(read_timeout: float) -> dict[str, Any]:
    """What ``kms serve`` gives ``uvicorn.Config`` for these limits: the guarded protocol, the keep-alive time, and
    no WebSocket upgrade (the service serves none: an upgrade request is an HTTP request like any other, screened)."""
    protocol = type("KmsHttpProtocol", (GuardedHttpTools,), {"head_timeout_s": read_timeout})
    return {"http": protocol, "ws": "none", "timeout_keep_alive": KEEP_ALIVE_S}


def typed_errors(app: Any) -> None:
    """Starlette's own answers (404, 405, an unexpected exception's 500) as typed JSON errors, not text. The
    500's traceback goes to the service log only (Starlette runs without ``debug``)."""
    # deferred: starlette only in the service process; kms service commands import this module
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    kinds = {404: "not-found", 405: "method-not-allowed"}

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "error"
        headers = exc.headers if isinstance(exc, HTTPException) else None  # 405's Allow
        body = {"error": kinds.get(status, "http-error"), "message": str(detail)}
        return JSONResponse(body, status_code=status, headers=headers)

    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": "internal", "message": INTERNAL}, status_code=500)

    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, internal)
