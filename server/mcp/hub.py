"""Many sessions in one process: the session registry a serving process holds.

A ``SessionHub`` pairs the process's services (``ProcessServices``: one model, one watcher, one
heartbeat) with any number of sessions, each a ``ToolRunner`` over its own ``AgentSession`` with its own
config (vault scope, tiers, allowlist, limits, approval mode, id, project). ``kms mcp`` opens one
session in it; a process serving several hosts opens one per host session.

Which session a request belongs to is decided where the connection is accepted, never by the client's
say-so in a message. Over HTTP (``server.mcp.http``) it is the verified bearer token's: each token
stands for one session (``for_token``), opened at its first request with the person's settings narrowed
by the token's scopes. A connection-bound transport (stdio, the SDK's in-memory client) serves one session
per connection, named by ``connection`` around the code that accepts it. The SDK enters the server's
``lifespan`` once per such connection; it takes the session named then and keeps it in the connection's
state, where ``resolve`` finds it for every request of that connection.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from server.activity import tokens
from server.activity.agent_session import AgentSession
from server.activity.remote_grants import identity
from server.config.scopes import ScopeError
from server.config.session_contract import SessionConfig
from server.errors import KmsError
from server.mcp.process import ProcessServices
from server.mcp.tools.base import ToolSpec
from server.mcp.tools.dispatch import ToolRunner
from server.store.db import thread_connection

if TYPE_CHECKING:
    from server.activity.tokens import Token

# the session the next connection accepted here belongs to (``SessionHub.connection``)
_ACCEPTING: ContextVar[ToolRunner | None] = ContextVar("kms_accepting_session", default=None)


@dataclass(frozen=True)
class Connection:
    """One accepted connection's state (the SDK's lifespan context): the session it serves."""

    runner: ToolRunner | None


class SessionHub:
    """The sessions one process serves over one database (see the module docstring). Thread-safe."""

    def __init__(
        self,
        services: ProcessServices,
        registry: list[ToolSpec] | None = None,
        *,
        settings: Callable[[str], SessionConfig] | None = None,
    ) -> None:
        self.services = services
        self.registry = registry
        self.settings = settings  # session id -> the person's settings as a session (token sessions start there)
        self._runners: dict[str, ToolRunner] = {}
        self._lock = threading.Lock()
        # where the review pages are served (``SessionConfig.review_url`` of the token sessions opened here): the
        # local listener's loopback address, and remote mode's public origin while its listener is open
        self.pages: str | None = None
        self.public_pages: str | None = None

    def open(self, config: SessionConfig | AgentSession) -> ToolRunner:
        """Serve one more session (``config`` over this process's database); reported in at once. A config that
        names no review pages gets this process's (``pages``), to name in its staged calls' answers."""
        if isinstance(config, SessionConfig) and config.review_url is None and self.pages is not None:
            config = dataclasses.replace(config, review_url=self.pages)
        session = config if isinstance(config, AgentSession) else AgentSession.open(config)
        if session.config.db_path != self.services.db_path:
            raise KmsError(
                "invalid-input", f"this process serves {self.services.db_path}, not {session.config.db_path}"
            )
        with self._lock:
            if session.id in self._runners:
                raise KmsError("already-exists", f"session {session.id} is already served here")
            runner = ToolRunner(session, self.registry, services=self.services)
            self._runners[session.id] = runner
        self.services.heartbeat.add(session)
        return runner

    def get(self, session_id: str) -> ToolRunner:
        with self._lock:
            runner = self._runners.get(session_id)
        if runner is None:
            raise KmsError("not-found", f"no session {session_id} is served here")
        return runner

    def sessions(self) -> list[ToolRunner]:
        with self._lock:
            return list(self._runners.values())

    def close(self, session_id: str) -> None:
        """The session ends: its reads are flushed and, if this process opened its row, it is marked ended."""
        with self._lock:
            runner = self._runners.pop(session_id, None)
        if runner is not None:
            runner.close()
            self.services.heartbeat.remove(session_id)

    def close_all(self) -> bool:
        """End every session, then the process's services; whether the process may exit normally."""
        for runner in self.sessions():
            self.close(runner.session.id)
        return self.services.close()

    @contextlib.contextmanager
    def connection(self, runner: ToolRunner) -> Iterator[None]:
        """A connection accepted within this block serves ``runner``'s session."""
        token = _ACCEPTING.set(runner)
        try:
            yield
        finally:
            _ACCEPTING.reset(token)

    @contextlib.asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[Connection]:
        """The SDK's per-connection lifespan (stdio, in-memory): remembers the session being accepted."""
        yield Connection(_ACCEPTING.get())

    def for_token(self, token: Token) -> ToolRunner:
        """The session ``token`` stands for: served already, or opened now from the person's settings as the
        token narrows them (its tiers, vault, folders, approval)."""
        with self._lock:
            runner = self._runners.get(token.session_id)
        if runner is not None:
            return runner
        if token.config is not None:
            base = SessionConfig.from_env(token.config, session_id=token.session_id, watch=False)
        elif self.settings is not None:
            base = self.settings(token.session_id)
        else:
            raise KmsError("not-found", "this process serves no token sessions")
        try:
            config = dataclasses.replace(token.scopes.narrow(base), token_id=token.id)
        except ScopeError as e:
            raise KmsError("not-found", f"this token's session cannot be served: {e}") from None
        if token.kind == "remote":  # a remote grant (docs/remote.md): its client's name, every write staged for
            # the person (``review_detached``: answered at once; ``approval``: never written unseen meanwhile);
            # its person is on the public origin (a paired device), never on this machine's loopback
            config = dataclasses.replace(
                config,
                project=identity(token.label),
                review_detached=True,
                approval="always",
                review_url=self.public_pages,
            )
        try:
            return self.open(config)
        except KmsError as e:
            if e.kind != "already-exists":
                raise
            return self.get(token.session_id)  # opened by a request of the same token meanwhile

    def close_ended_tokens(self, now: float | None = None) -> list[str]:
        """End the sessions whose token was revoked or expired (their next request would be refused anyway),
        and mark ended the launcher sessions whose lease lapsed (``tokens.end_lapsed_sessions``): the dashboard
        then shows them ended. Returns the ids of the sessions closed here."""

        conn = thread_connection(self.services.db_path)
        tokens.end_lapsed_sessions(conn, now=now)
        ended = []
        for runner in self.sessions():
            token_id = runner.config.token_id
            if token_id is None:
                continue
            try:
                state = tokens.get(conn, token_id).state(time.time() if now is None else now)
            except KmsError:
                state = "gone"
            if state != "active":
                self.close(runner.session.id)
                ended.append(runner.session.id)
        return ended

    def resolve(self, ctx: Any) -> ToolRunner:
        """The session a request belongs to: its connection's, or its verified token's."""
        state = getattr(ctx, "lifespan_context", None)
        runner = state.runner if isinstance(state, Connection) else None
        if runner is None and (token_id := token_of(ctx)) is not None:
            with self._lock:  # the token's session, named by the verifier (``AccessToken.subject``)
                runner = self._runners.get(_access(ctx).subject or "")
            if runner is None:  # its first request: open it from the token's row
                runner = self.for_token(tokens.get(thread_connection(self.services.db_path), token_id))
        if runner is None or self._runners.get(runner.session.id) is not runner:
            raise KmsError("not-found", "this connection has no kms session (or it has ended)")
        return runner


def _access(ctx: Any) -> Any:
    """The verified ``AccessToken`` of the HTTP request behind ``ctx`` (set by the SDK's bearer middleware from
    ``KmsTokenVerifier``: its ``client_id`` is the token's id, its ``subject`` the token's session), else None."""
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    return getattr(user, "access_token", None)


def token_of(ctx: Any) -> str | None:
    """The verified token id of the HTTP request behind ``ctx``, if any."""
    token_id = getattr(_access(ctx), "client_id", None)
    return token_id if isinstance(token_id, str) else None
