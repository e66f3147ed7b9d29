"""The real MCP server (registry, dispatcher, adapter) behind a real in-memory SDK client."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

if TYPE_CHECKING:  # the SDK is imported only when a test opens a client
    from mcp.client import Client

    from server.mcp.tools.dispatch import ToolRunner

    class RunnerClient(Client):
        """The SDK client, carrying the session's ``ToolRunner`` for tests that look at the server side."""

        runner: ToolRunner


class TierSwitches(TypedDict, total=False):
    """The tier switches a test turns on with ``mcp_client(db, **ON)`` (typed, so ``**`` cannot mean ``registry``)."""

    write_enabled: bool
    edit_enabled: bool
    organize_enabled: bool


@contextlib.asynccontextmanager
async def mcp_client(
    db_path: Path,
    *,
    registry: Sequence[Any] | None = None,
    client_options: dict[str, Any] | None = None,
    **config: Any,
) -> AsyncIterator[RunnerClient]:
    """``config`` overrides fields of the ``SessionConfig`` the environment gives (e.g. ``vault="a"``);
    ``registry`` serves other tools than ``server.mcp.tools.REGISTRY``; ``client_options`` go to the SDK's
    ``Client`` (``mode="legacy"`` for a 2025-era connection, an ``elicitation_callback``)."""
    from mcp.client import Client

    from server.config.session_contract import SessionConfig
    from server.mcp.serve import build_server
    from server.mcp.tools.dispatch import ToolRunner

    env = {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]}
    cfg = SessionConfig.from_env(env, watch=False, **config)
    runner = ToolRunner(cfg, registry)  # one session, with process services of its own
    try:
        async with Client(build_server(runner), **(client_options or {})) as sdk_client:
            client = cast("RunnerClient", sdk_client)  # the same object, with the runner set on it here
            client.runner = runner
            yield client
    finally:
        runner.close()
