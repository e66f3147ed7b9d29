"""One agent session as a value: what a session owns, apart from what its process owns.

A process that serves agents (``kms mcp`` over stdio, one session; a service, many) holds the
watcher, the embedding model and the database handles once. Each session it serves is an
``AgentSession``: its frozen ``SessionConfig`` (vault scope, tiers, allowlist, limits, approval mode,
id, project), its rate limiter, the identity it works for, its read tracking and the clock its
deadlines run on. Everything a tool call needs to know about *who* calls reaches it from here, never
from the environment or process state, so one process can hold any number of sessions at once.

The person's live controls (paused, revoked) are not cached here: the guard reads them from the
database on every write call (``server.activity.control``), so every process obeys at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from server.activity.ratelimit import RateLimiter
from server.activity.reads import ReadTracker
from server.activity.visits import SessionIdentity
from server.config import tiers
from server.config.allowlist import Allowlist
from server.config.session_contract import SessionConfig
from server.config.tiers import Tier
from server.index.notes import index_is_empty
from server.store.db import thread_connection


@dataclass
class AgentSession:
    """The per-session half of a server: see the module docstring. ``close()`` flushes its reads."""

    config: SessionConfig
    limits: RateLimiter
    identity: SessionIdentity
    reads: ReadTracker
    allowlist: Allowlist
    clock: Callable[[], float] = field(default=time.time)

    @classmethod
    def open(
        cls, config: SessionConfig, *, limits: RateLimiter | None = None, clock: Callable[[], float] = time.time
    ) -> AgentSession:
        """A session for ``config``: its limiter from the config's limits (0: unlimited) unless given."""
        if limits is None:
            limits = RateLimiter(per_minute=config.per_minute or None, per_session=config.per_session or None)
        return cls(
            config,
            limits,
            SessionIdentity(config.session_id, config.project),
            ReadTracker(config.db_path, config.session_id),
            Allowlist(config.allowlist).narrowed(config.token_folders),
            clock,
        )

    @property
    def id(self) -> str:
        return self.config.session_id

    def allows(self, tier: Tier) -> bool:
        """Whether this session's settings turn on tools of ``tier`` (and every tier before it)."""
        return tiers.tier_enabled(self.config, tier)

    def disabled_message(self, tool: str, tier: Tier) -> str:
        """Why ``tool`` is off for this session and what the person can do (``feature-disabled``)."""
        c = self.config
        message = tiers.disabled_message(c, tool, tier)
        # the agent tools default to on once a vault is registered: with none, that is the real fix

        try:
            problem = index_is_empty(thread_connection(c.db_path))
        except Exception:  # the DB unreachable: the message above still holds
            problem = None
        return f"{message} Also, {problem}." if problem else message

    def close(self) -> None:
        self.reads.close()
