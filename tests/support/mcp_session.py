"""The real MCP server (registry, dispatcher, adapter) behind a real in-memory SDK client."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any


@contextlib.asynccontextmanager
async def mcp_client(
    db_path: Path,
    registry: Sequence[Any] | None = None,
    *,
    client_options: dict[str, Any] | None = None,
    **config: object,
) -> AsyncIterator[object]:
    """``config`` overrides fields of the ``SessionConfig`` the environment gives (e.g. ``vault="a"``);
    ``registry`` serves other tools than ``server.mcp.tools.REGISTRY``; ``client_options`` go to the SDK's
    ``Client`` (``mode="legacy"`` for a 2025-era connection, an ``elicitation_callback``)."""
    from mcp.client import Client

    from server.config.session import SessionConfig
    from server.mcp.serve import build_server
    from server.mcp.tools.dispatch import ToolRunner

    env = {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]}
    cfg = SessionConfig.from_env(env, watch=False, **config)
    runner = ToolRunner(cfg, registry)  # one session, with process services of its own
    try:
        async with Client(build_server(runner), **(client_options or {})) as client:
            client.runner = runner  # type: ignore[attr-defined]
            yield client
    finally:
        runner.close()
