"""The remote listener's life: a revoked grant's open event stream ends within seconds, and a real ``kms serve``
stopped by SIGTERM closes both listeners and exits 0."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import apsw
import httpx
import httpx2
from support.net import free_port
from support.remote import authorize, exchange, remote_config, remote_service, wait_until
from test_service_streams import open_stream

from server.activity import remote_grants


def test_revoking_a_grant_ends_its_open_stream(db_path: Path, tmp_path: Path, conn: apsw.Connection) -> None:
    with remote_service(db_path, tmp_path) as remote, httpx.Client(timeout=10) as http:
        client_id, verifier, code = authorize(http, conn, remote.base)
        access = exchange(http, remote.base, client_id, verifier, code).json()["access_token"]
        with httpx2.Client(timeout=httpx2.Timeout(10, read=60)) as client:
            stream = open_stream(client, SimpleNamespace(url=remote.resource), access)  # type: ignore[arg-type]
            time.sleep(1.0)  # the wait is the test: the stream stays open across checks of its (active) grant
            assert stream.ended_at is None, stream.error
            remote_grants.revoke_grant(conn, remote_grants.list_grants(conn)[0]["id"])
            revoked = time.monotonic()
            stream.join(5)
            assert stream.ended_at is not None and stream.ended_at - revoked <= 2.5
            assert stream.error is None, f"the stream was cut, not ended: {stream.error!r}"


def _open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_closes_both_listeners(db_path: Path, tmp_path: Path) -> None:
    port, remote_port = free_port(), free_port()
    remote_config(tmp_path, remote_port)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "serve", "--port", str(port)],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: _open(port) and _open(remote_port), 60, "both listeners")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not _open(port) and not _open(remote_port)
