"""Every host ``kms mcp-config HOST --install`` supports, stdio and ``--http``: the entry kms wrote in the
host's own file is read back and started (or reached) exactly as that host would, then driven as a host
does with the real SDK client: initialize, ``tools/list``, a pause, every write tool the tiers allow, SIGTERM.

Why: the in-process tests call kms on the test's own threads, without pauses, signals or crashes; a host
runs it as a process of its own, waits while the person reads, and stops it with SIGTERM. A Cursor-style
session (list, wait 5 s, ``kms_create``) once got a segfault (exit 139) there and nothing in the suite saw it.

The pause (``IDLE_S``) outlasts every background timer of a kms process, so each has fired and each thread
it started has come and gone before the writes:

- the deferred background start: 0.3 s after the tool list is written (``serve.BACKGROUND_GRACE_S``), 3 s at
  the latest (``serve.BACKGROUND_AFTER_S``): the ``kms-warm-writes`` thread imports the write modules (YAML,
  the editors) and exits; the service's semantic model start (no model here: ``KMS_EMBED_DOWNLOAD=0``);
- the watcher: 150 ms debounce, 50 ms step (``watcher.DEBOUNCE_MS``);
- the SDK's worker threads (anyio's ``to_thread``): an idle one exits after 10 s (``WorkerThread.MAX_IDLE_TIME``),
  so the writes run on threads that did not import what they use (the pattern that crashed yaml-rs);
- the heartbeat: every 15 s (``process.HEARTBEAT_SECONDS``), crossed twice;
- the service: its token sweep every 2 s (``service.SWEEP_S``); a token's ``last_used_at`` written at most
  every 30 s (``tokens.LAST_USED_EVERY_S``), so the writes' requests write it again.

Not crossed, and why: the rate-limit window (60 s, ``ratelimit.WINDOW_S``) counts writes, and the writes come
after the pause (``write.per_minute`` is raised so the ~15 calls fit); ``kms_reindex``'s 60 s interval gates
only that tool; the 45 s "live" and 120 s "stale" marks are what readers (the dashboard) compute from the
heartbeat, not timers in the process; the leftover-file sweep (600 s) and approval timeout (120 s, approval
off here) have no work to do. None has a test knob; waiting minutes for them would not find more.

All hosts run at once, each its own process (or session of the one service), so the pause is paid once:
the whole module takes 70-90 s on two cores (measured: 76 s). ``-X faulthandler`` is put before the entry's args
(its ``-E`` ignores ``PYTHONFAULTHANDLER``) so a crash shows where; nothing else of the entry changes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.cli import kms, ok
from support.host_harness import (
    HTTP_HOSTS,
    STDIO_HOSTS,
    WriteRun,
    call_every_write_tool,
    expand_http,
    read_entry,
    seed_host_folder,
    signal_death,
    stdio_entry,
    write_tool_names,
)

from kmscli.hosts import HOSTS
from server.activity.tokens import HOST_TOKEN_VARS

# one xdist worker runs the module (``--dist loadgroup`` in pyproject.toml): the fleet starts once
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300), pytest.mark.xdist_group("host_entries")]

IDLE_S = 32.0  # past every timer in the module docstring (the longest crossed: 30 s)
START_S = 120.0  # a deadline for the service to come up (a cold start on a loaded 2-core machine)


@dataclass
class Outcome:
    """One host's session, for its test to judge."""

    host: str
    transport: str
    entry: dict[str, Any] = field(default_factory=dict)
    listed: list[str] = field(default_factory=list)
    writes: WriteRun = field(default_factory=WriteRun)
    error: str = ""
    returncode: int | None = None
    stderr: str = ""


@dataclass
class Fleet:
    stdio: dict[str, Outcome]
    http: dict[str, Outcome]
    service_url: str
    service_returncode: int | None
    service_stderr: str
    service_stopped_cleanly: bool  # its state file removed: the shutdown ran, not just the process ended


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def as_transport(streams: Any) -> AsyncIterator[Any]:
    yield streams


async def session(client: Any, out: Outcome, folder: str) -> None:
    listed = await client.list_tools()
    out.listed = [t.name for t in listed.tools]
    await anyio.sleep(IDLE_S)  # the wait is the test: the person reads what the agent said (module docstring)
    out.writes = await call_every_write_tool(client, folder)


async def drive_stdio(out: Outcome, home: Path, work: Path) -> None:
    from mcp.client import Client

    try:
        async with stdio_entry(out.entry, home, work, work / f"stderr-{out.host}.txt") as (launched, streams):
            try:
                async with Client(as_transport(streams), read_timeout_seconds=90) as client:
                    try:
                        await session(client, out, f"s-{out.host}")
                    finally:
                        out.returncode = await launched.terminate()
            except Exception:
                out.error = out.error or traceback.format_exc()
            out.returncode = launched.returncode if out.returncode is None else out.returncode
            out.stderr = launched.stderr
    except Exception:
        out.error = out.error or traceback.format_exc()


async def drive_http(out: Outcome, secrets: dict[str, str], home: Path) -> None:
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    try:
        env = {**os.environ, "HOME": str(home)}
        url, headers = await anyio.to_thread.run_sync(lambda: expand_http(out.host, out.entry, {**secrets, **env}))
        http = create_mcp_http_client(headers=headers)
        async with http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=90) as client:
            await session(client, out, f"h-{out.host}")
    except Exception:
        out.error = traceback.format_exc()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Install kms for every host (stdio and ``--http``) into homes of their own, start the service where the
    HTTP entries point, and run every host's session at once. Module-scoped: the pause is paid once."""
    world = tmp_path_factory.mktemp("hosts")
    vault = world / "vault"
    vault.mkdir()
    for host in STDIO_HOSTS:
        seed_host_folder(vault, f"s-{host}")
    for host in HTTP_HOSTS:
        seed_host_folder(vault, f"h-{host}")
    port = free_port()
    with pytest.MonkeyPatch.context() as mp:  # the module fixture runs before the per-test isolated_env
        for var in [v for v in os.environ if v.startswith(("KMS_", "XDG_"))]:
            mp.delenv(var)
        for var, value in {
            "HOME": str(world / "home"),
            "KMS_DB_PATH": str(world / "kms.db"),
            "KMS_CONFIG": str(world / "config.toml"),
            "KMS_EMBED_DOWNLOAD": "0",
            "HF_HUB_OFFLINE": "1",
        }.items():
            mp.setenv(var, value)
        ok(kms("vault", "add", str(vault), "--name", "hosts"))
        for key, value in (
            ("agent.write", "on"),
            ("agent.edit", "on"),
            ("agent.organize", "on"),
            ("write.per_minute", "1000"),
            ("service.port", str(port)),
        ):
            ok(kms("config", "set", key, value))
        stdio = {h: Outcome(h, "stdio") for h in STDIO_HOSTS}
        for host, out in stdio.items():
            home = world / f"home-stdio-{host}"
            ok(kms("mcp-config", host, "--install", HOME=str(home)))
            out.entry = read_entry(HOSTS[host], home)
        http = {h: Outcome(h, "http") for h in HTTP_HOSTS}
        secrets: dict[str, str] = {}
        for host, out in http.items():  # installed before the service runs: the entry names where it will be
            ok(kms("mcp-config", host, "--http", "--install", HOME=str(world / f"home-http-{host}")))
            out.entry = read_entry(HOSTS[host], world / f"home-http-{host}")
            secret = ok(kms("token", "secret", host)).stdout.strip()
            secrets[HOST_TOKEN_VARS.get(host, f"input:{host}")] = secret
            secrets[f"input:{host}"] = secret
        service_err = world / "stderr-service.txt"
        with open(service_err, "wb") as err:
            service = subprocess.Popen(
                [sys.executable, "-X", "faulthandler", "-m", "kmscli", "serve"],
                env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        try:
            from server.mcp import service as service_state

            deadline = time.monotonic() + START_S
            state = service_state.read_state(world / "kms.db")
            while (state is None or state.pid != service.pid) and time.monotonic() < deadline:
                assert service.poll() is None, service_err.read_text()
                time.sleep(0.1)
                state = service_state.read_state(world / "kms.db")
            assert state is not None, "the service did not come up:\n" + service_err.read_text()

            async def everyone() -> None:
                async with anyio.create_task_group() as tg:
                    for host, out in stdio.items():
                        tg.start_soon(drive_stdio, out, world / f"home-stdio-{host}", world)
                    for host, out in http.items():
                        tg.start_soon(drive_http, out, secrets, world / f"home-http-{host}")

            anyio.run(everyone)
        finally:
            if service.poll() is None:
                service.send_signal(signal.SIGTERM)
            try:
                service.wait(30)
            except subprocess.TimeoutExpired:
                service.kill()
                service.wait(10)
        service_stderr = service_err.read_text(errors="replace")
        for out in http.values():
            out.stderr = service_stderr  # the service's own stderr is where a crash of an HTTP session shows
        stopped = not service_state.state_path(world / "kms.db").exists()  # read_state would drop a stale one
        yield Fleet(stdio, http, state.url, service.returncode, service_stderr, stopped)


def judge(out: Outcome) -> None:
    """The host's session went as a host needs: no crash, every write tool listed and successful."""
    where = f"{out.transport} {out.host}: entry {out.entry}\n--- stderr ---\n{out.stderr}"
    assert not signal_death(out.returncode) or out.transport == "http", (
        f"kms died of a signal (exit {out.returncode}) — {where}\n{out.error}"
    )
    assert not out.error, f"{out.error}\n{where}"
    expected = write_tool_names()
    assert [t for t in out.listed if t in expected] == expected, (out.listed, where)
    assert [name for name, _, _ in out.writes.calls] == expected, where
    assert not out.writes.failed(), (out.writes.failed(), where)
    assert "Traceback" not in out.stderr and "Fatal Python error" not in out.stderr, where


@pytest.mark.parametrize("host", STDIO_HOSTS)
def test_the_hosts_stdio_entry_survives_a_hosts_session(fleet: Fleet, host: str) -> None:
    out = fleet.stdio[host]
    assert out.entry["args"][-3:] == ["-m", "kmscli", "mcp"], out.entry
    judge(out)
    assert out.returncode == 0, f"SIGTERM ended kms mcp with {out.returncode}\n{out.stderr}"


@pytest.mark.parametrize("host", HTTP_HOSTS)
def test_the_hosts_http_entry_reaches_the_service_and_writes(fleet: Fleet, host: str) -> None:
    out = fleet.http[host]
    assert (out.entry.get("url") or out.entry.get("serverUrl")) == fleet.service_url, (out.entry, fleet.service_url)
    judge(out)


def test_the_service_survives_every_hosts_session_and_stops_on_sigterm(fleet: Fleet) -> None:
    assert not signal_death(fleet.service_returncode), (fleet.service_returncode, fleet.service_stderr)
    assert fleet.service_returncode == 0, fleet.service_stderr
    assert fleet.service_stopped_cleanly, "the service left its state file: it did not shut down"
    assert "Traceback" not in fleet.service_stderr and "Fatal Python error" not in fleet.service_stderr, (
        fleet.service_stderr
    )
