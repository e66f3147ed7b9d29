"""``kms mcp`` over stdio survives a write made after its background work (issue 37).

The server imports the write modules on a short-lived thread (``kms-warm-writes``) once the tools are
listed. With yaml-rs as the frontmatter reader, the first write after that thread ended killed the server
with SIGSEGV: a host that listed the tools, waited a few seconds, then wrote, lost its server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import apsw
import psutil
from support.mcp_stdio import server_env

# server.mcp.serve logs it at DEBUG as the warming thread ends, with that thread's id
WARM = re.compile(r"the write modules are warm \(thread (\d+) ends\)")


def _message(id_: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode() + b"\n"


class _Lines:
    """The server's stderr, drained on a thread (DEBUG logging fills a pipe), searchable while it runs."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self.lines.append(raw.decode("utf-8", "replace"))

    def wait_for(self, pattern: re.Pattern[str], deadline: float) -> re.Match[str]:
        while True:
            for line in self.lines:
                if found := pattern.search(line):
                    return found
            assert time.monotonic() < deadline, f"no {pattern.pattern!r} on stderr:\n{''.join(self.lines)[-4000:]}"
            time.sleep(0.05)


def _thread_gone(pid: int, tid: int, deadline: float) -> None:
    while tid in {t.id for t in psutil.Process(pid).threads()}:
        assert time.monotonic() < deadline, "the background thread never ended"
        time.sleep(0.05)


def test_a_write_after_the_background_work_leaves_the_server_alive(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    env = server_env(
        db_path,
        tmp_path,
        KMS_AGENT_WRITE_TOOLS_ENABLED="1",
        KMS_EMBED_ENABLED="0",
        KMS_LOG_LEVEL="DEBUG",
        PYTHONFAULTHANDLER="1",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stderr = _Lines(proc.stderr)

    def call(id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_message(id_, method, params))
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, f"the server died (exit {proc.wait(timeout=10)}):\n{''.join(stderr.lines)[-4000:]}"
        reply = json.loads(line)
        assert reply["id"] == id_, reply
        return reply

    try:
        call(
            1,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        )
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n")
        proc.stdin.flush()
        tools = {t["name"] for t in call(2, "tools/list", {})["result"]["tools"]}
        assert "kms_create" in tools
        deadline = time.monotonic() + 60
        warmed = stderr.wait_for(WARM, deadline)  # the warming thread imported the writers (and the YAML reader)
        _thread_gone(proc.pid, int(warmed.group(1)), deadline)  # and ended: the pattern that crashed yaml-rs

        reply = call(
            3,
            "tools/call",
            {
                "name": "kms_create",
                "arguments": {
                    "vault": "sample",
                    "title": "After the warm-up",
                    "content": "---\ntags:\n  - a\n  - b\nstatus: yes\n---\nWritten after the background work.\n",
                },
            },
        )
        assert not reply["result"]["isError"], reply
        created = vault_dir / reply["result"]["structuredContent"]["path"]
        assert "Written after the background work." in created.read_text(encoding="utf-8")
        reply = call(4, "tools/call", {"name": "kms_list_tags", "arguments": {}})
        assert not reply["result"]["isError"], reply
        assert proc.poll() is None, "the server is gone"
    finally:
        proc.stdin.close()  # the end of input: the server ends its session and exits
        code = proc.wait(timeout=30)
    assert code == 0, f"exit {code} (negative: killed by that signal):\n{''.join(stderr.lines)[-4000:]}"
