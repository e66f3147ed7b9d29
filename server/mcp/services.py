"""Per-process services of a running MCP server: session heartbeat and semantic search.

Each service has optional ``start()``/``close()``; the adapter calls them. They are
registered into ``runner.ctx.services`` so handlers reach them through the context.
"""

from __future__ import annotations

import logging
import threading

from server.mcp.tools.dispatch import ToolRunner
from server.store.db import connect

log = logging.getLogger("kms.session")
HEARTBEAT_SECONDS = 15


class SessionHeartbeat:
    """Report this server into ``sessions`` so the dashboard lists it, and mark its end."""

    def __init__(self, runner: ToolRunner) -> None:
        self.config = runner.config
        self._writes = runner.writes
        self._identity = runner.ctx.services.get("identity")
        self._stop = threading.Event()
        self._created = False

    def start(self) -> None:
        from server.activity.sessions import get_session, touch_session

        conn = connect(self.config.db_path)
        try:
            self._created = get_session(conn, self.config.session_id) is None
            identity = self._identity.project if self._identity is not None else self.config.project
            touch_session(conn, self.config.session_id, kind="server", project=identity)
            if self._writes.enabled:  # the dashboard shows this session's limits before its first write
                from server.activity.ratelimit import record_limits

                record_limits(conn, self.config.session_id, self._writes.limits)
        finally:
            conn.close()
        threading.Thread(target=self._beat, name="kms-heartbeat", daemon=True).start()

    def _beat(self) -> None:
        from server.activity.sessions import touch_session

        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                conn = connect(self.config.db_path)
                touch_session(conn, self.config.session_id, kind="server")
                conn.close()
            except Exception:  # a missed heartbeat is harmless
                log.debug("heartbeat failed", exc_info=True)

    def close(self) -> None:
        self._stop.set()
        if self._created:  # a launcher-owned session is ended by the launcher, with claude's exit code
            from server.activity.sessions import end_session

            conn = connect(self.config.db_path)
            end_session(conn, self.config.session_id, 0)
            conn.close()


def register_services(runner: ToolRunner) -> None:
    runner.ctx.services["session"] = SessionHeartbeat(runner)
    from server.mcp.tools.semantic_tool import make_semantic_service

    runner.ctx.services["semantic"] = make_semantic_service(runner.config)
