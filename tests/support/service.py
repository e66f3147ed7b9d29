"""A real kms service for tests: ``kms serve`` as a subprocess on a free loopback port (``Served``), ``kms``
commands run as a person runs them, and a real MCP client over Streamable HTTP (``search``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from server.mcp import service
from support.net import free_port


def kms_env(**extra: str) -> dict[str, str]:
    """The test's environment (``isolated_env``) for a ``kms`` subprocess."""
    env = {**os.environ, **extra}
    env.pop("PYTHONUNBUFFERED", None)
    return env


def kms_args(*args: str) -> list[str]:
    return [sys.executable, "-m", "kmscli", *args]


def run_kms(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One ``kms`` command to its end (no traceback allowed, whatever its exit code)."""
    proc = subprocess.run(
        kms_args(*args), env=env or kms_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def wait_for(cond: Any, timeout: float, what: str, every: float = 0.05) -> Any:
    """Poll ``cond`` until it returns something truthy (returned), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


@dataclass
class Served:
    """``kms serve`` running in the foreground of a subprocess (its exit code is the test's to see)."""

    proc: subprocess.Popen[str]
    db_path: Path
    port: int

    @classmethod
    def start(cls, db_path: Path, port: int | None = None, timeout: float = 30.0, **env: str) -> Served:
        """``env``: variables for this service only (``KMS_CRASH_AT``, ``KMS_SERVICE_READ_TIMEOUT``, ...)."""
        port = port or free_port()
        proc = subprocess.Popen(
            kms_args("serve", "--port", str(port)),
            env=kms_env(**env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        served = cls(proc, db_path, port)
        try:
            wait_for(served.answers, timeout, f"kms serve on port {port} to answer")
        except AssertionError:
            served.kill()
            raise
        return served

    def answers(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"kms serve exited ({self.proc.returncode}): {self.proc.stderr.read()}")  # type: ignore[union-attr]
        state = service.read_state(self.db_path)
        return state is not None and state.pid == self.proc.pid and service.health(state.url) is not None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def wait(self, timeout: float = 30.0) -> tuple[int, str]:
        """Its exit code and stderr, once it has ended."""
        _out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop it as systemd does (SIGTERM) or Ctrl-C (SIGINT): it must clean up and exit 0, never die of it;
        nothing may have escaped a route. One that has already ended (a test killed it) is left as it is."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        code, err = self.wait()
        assert code == 0, (code, err[-2000:])
        assert "Exception in ASGI application" not in err, err[-2000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


async def call(url: str, secret: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call through a real MCP client over Streamable HTTP, with ``secret`` as its bearer token."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as c:
        result = await c.call_tool(tool, arguments)
        return dict(result.structured_content or {})


async def search(url: str, secret: str, query: str = "auth") -> dict[str, Any]:
    return await call(url, secret, "kms_search", {"query": query})
