"""What the dashboard knows right now, shared by its widgets (UI thread only)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from server.activity.approvals import Pending
from server.activity.feed import SessionInfo
from server.config.settings import Settings
from server.index.overview import Overview

MAX_ARRIVALS = 10_000


@dataclass
class DashboardState:
    """Filled from the poller's messages; widgets render from it and never query the DB."""

    clock: Callable[[], float]
    last_seen_id: int = 0
    sessions: list[SessionInfo] = field(default_factory=list)
    sessions_at: float = 0.0  # the clock when the sessions were read
    overview: Overview | None = None  # None until the first read
    settings: Settings | None = None
    reverted: dict[int, int] = field(default_factory=dict)  # invocation id -> the revert's id
    overwritten: set[int] = field(default_factory=set)  # agent writes a later save dropped
    arrivals: dict[int, float] = field(default_factory=dict)  # invocation id -> wall time it reached the UI
    tools_seen: set[str] = field(default_factory=set)
    loaded: bool = False  # the first window has been shown
    pending: list[Pending] = field(default_factory=list)  # calls waiting for the person's approval
    pending_rung: set[int] = field(default_factory=set)  # waiting calls the bell rang for (once each)
    bells: int = 0  # how often the dashboard rang for a new waiting call

    def note_rows(self, rows: list[dict[str, Any]], *, live: bool = True) -> None:
        """Record arrivals and what they imply (a successful revert marks its target)."""
        wall = time.time()
        for r in rows:
            self.tools_seen.add(r["tool"])
            if r.get("source") == "outside":
                continue  # an edit made outside kms (``server.activity.outside_feed``): no invocation id
            if live:
                self.arrivals.setdefault(r["id"], wall)
            self.last_seen_id = max(self.last_seen_id, r["id"])
            if r.get("reverts_id") is not None and r["status"] == "success":
                self.reverted.setdefault(r["reverts_id"], r["id"])
        if len(self.arrivals) > MAX_ARRIVALS:  # only recent arrivals matter (latency checks)
            for key in sorted(self.arrivals)[: MAX_ARRIVALS // 2]:
                del self.arrivals[key]
