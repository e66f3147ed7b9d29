"""The stdio transport of ``kms mcp`` (server/mcp/stdio.py), spoken to over real pipes and files."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import subprocess
import sys
import time
import tty
from pathlib import Path

import apsw
import pytest
from support.vaults import write
from support.waiting import until
from test_mcp_stdio import server_env, stdio_server

from server.index.note_data import unfence

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def lines(*messages: dict) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def replies(stdout: bytes) -> dict[object, dict]:
    out = [json.loads(line) for line in stdout.splitlines()]  # every line is a whole JSON message
    return {m["id"]: m for m in out}


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
def test_requests_sent_before_the_input_ends_are_all_answered(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, stdin_kind: str
) -> None:
    """``printf ... | kms mcp``: the client is done sending, not gone (the SDK's own transport
    cancels what is still running). A pipe is read by the event loop, a file on a thread."""
    requests = lines(
        INIT,
        INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": "s",
            "method": "tools/call",
            "params": {"name": "kms_search", "arguments": {"query": "shakshuka"}},
        },
    )
    cmd = [sys.executable, "-m", "kmscli", "mcp"]
    env = server_env(db_path, tmp_path, KMS_EMBED_ENABLED="0")
    if stdin_kind == "pipe":
        done = subprocess.run(cmd, input=requests, capture_output=True, env=env, timeout=60)
    else:
        (tmp_path / "requests.jsonl").write_bytes(requests)
        with open(tmp_path / "requests.jsonl", "rb") as stdin:
            done = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    got = replies(done.stdout)
    assert set(got) == {1, 2, "s"}
    assert "kms_search" in {t["name"] for t in got[2]["result"]["tools"]}
    assert got["s"]["result"]["structuredContent"]["hits"][0]["title"] == "Shakshuka"


def test_stray_output_in_the_server_never_reaches_the_wire(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """A print or a child process writing to fd 1 while serving goes to stderr, not into the protocol."""
    noisy = (  # starts once the server has pointed fd 1 away from the wire
        "import os, sys, threading, time\n"
        "wire = os.fstat(1).st_ino\n"
        "def noise():\n"
        "    while os.fstat(1).st_ino == wire: time.sleep(0.005)\n"
        "    for _ in range(50):\n"
        "        print('STRAY-PRINT', flush=True); os.write(1, b'STRAY-FD1\\n'); time.sleep(0.01)\n"
        "threading.Thread(target=noise, daemon=True).start()\n"
        "from server.mcp.serve import main\n"
        "sys.exit(main([]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", noisy],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(db_path, tmp_path, KMS_EMBED_ENABLED="0"),
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(lines(INIT, INITIALIZED))
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    for i in range(40):  # calls while the noise runs
        proc.stdin.write(
            lines(
                {
                    "jsonrpc": "2.0",
                    "id": 10 + i,
                    "method": "tools/call",
                    "params": {"name": "kms_list_tags", "arguments": {}},
                }
            )
        )
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        assert reply["id"] == 10 + i and not reply["result"]["isError"]
    # the noise is over (all 50 of each on stderr) before the session ends and fd 1 is restored
    assert proc.stderr is not None
    seen = bytearray()
    os.set_blocking(proc.stderr.fileno(), False)

    def noise_over() -> bool:
        with contextlib.suppress(BlockingIOError):
            seen.extend(os.read(proc.stderr.fileno(), 1 << 16) or b"")  # type: ignore[union-attr]
        return seen.count(b"STRAY-PRINT") == 50 and seen.count(b"STRAY-FD1") == 50

    until(noise_over, what="the noise over")
    os.set_blocking(proc.stderr.fileno(), True)
    rest, err = proc.communicate(timeout=30)  # closes stdin: the end of input
    err = bytes(seen) + err
    assert b"STRAY" not in rest
    assert err.count(b"STRAY-PRINT") == 50 and err.count(b"STRAY-FD1") == 50


async def test_a_result_bigger_than_the_pipe_buffer_arrives_whole(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    """A reply larger than the 64 KB pipe buffer is sent with flow control, in one piece."""
    from server.index.indexer import index_vault
    from server.vault.registry import list_vaults

    body = "".join(f"line {i:05d} of a long note with a few words\n" for i in range(2000))  # ~90 KB
    write(vault_dir / "Long.md", body)
    index_vault(indexed, list_vaults(indexed)[0])
    nid = indexed.execute("SELECT id FROM notes WHERE title = 'Long'").fetchall()[0][0]
    async with stdio_server(db_path, tmp_path, KMS_EMBED_ENABLED="0") as client:
        for _ in range(3):
            result = await client.call_tool("kms_read", {"noteId": nid, "maxTokens": 24_000})
            assert not result.is_error, result.structured_content
            assert unfence(result.structured_content["body"]) == body


def _initialize_over(fd_in: int, fd_out: int, timeout: float = 30) -> dict:
    os.write(fd_in, lines(INIT))
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf and time.monotonic() < deadline:
        ready, _, _ = select.select([fd_out], [], [], 0.5)
        if ready:
            buf += os.read(fd_out, 65536)
    return json.loads(buf.split(b"\n")[0])


@pytest.mark.parametrize("wire", ["pipes", "terminal"])
def test_sigterm_ends_the_session_cleanly(indexed: apsw.Connection, db_path: Path, tmp_path: Path, wire: str) -> None:
    """Hosts stop servers with SIGTERM while the input is still open: the server ends the session
    (marked ended, no traceback) and exits at once, also when it reads a terminal."""
    env = server_env(db_path, tmp_path, KMS_EMBED_ENABLED="0", KMS_SESSION_ID="term")
    cmd = [sys.executable, "-m", "kmscli", "mcp"]
    if wire == "pipes":
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        fds = (proc.stdin.fileno(), proc.stdout.fileno())
    else:
        main, child = pty.openpty()
        tty.setraw(child)
        proc = subprocess.Popen(cmd, stdin=child, stdout=child, stderr=subprocess.PIPE, env=env)
        os.close(child)
        fds = (main, main)
    try:
        reply = _initialize_over(*fds)
    except BaseException:
        proc.kill()  # a failed start must not leave a server behind
        proc.wait(timeout=15)
        raise
    assert reply["id"] == 1 and "result" in reply
    started = time.monotonic()
    proc.terminate()
    assert proc.wait(timeout=15) == 0
    assert time.monotonic() - started < 10
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()
    ended = indexed.execute("SELECT ended_at FROM sessions WHERE id = 'term'").fetchall()
    assert ended and ended[0][0] is not None


def test_a_cancelled_request_does_not_hold_up_the_end(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    """The SDK never answers a request the client cancelled: the end of input must not wait for it."""
    requests = lines(
        INIT,
        INITIALIZED,
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "kms_inventory", "arguments": {"limit": 500}},
        },
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "no"}},
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kmscli", "mcp"],
        input=requests,
        capture_output=True,
        env=server_env(db_path, tmp_path, KMS_EMBED_ENABLED="0"),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert time.monotonic() - started < 8  # the end of input waits up to 10 s only for owed answers
    assert 1 in replies(done.stdout)


@pytest.mark.parametrize("how", ["end of input", "sigterm"])
def test_the_server_ends_cleanly_while_the_model_is_still_loading(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, embed_model_dir: Path, how: str
) -> None:
    """onnxruntime aborts the process (SIGABRT) when the interpreter finalises under a session being
    built: the server waits for the load (bounded) before it exits. Closed at several moments of
    the load, it always exits 0 (SIGTERM once serving: the handler is installed with the session)."""
    env = server_env(db_path, tmp_path, KMS_EMBED_MODEL_DIR=str(embed_model_dir), KMS_EMBED_DOWNLOAD="0")
    for delay in (0.0, 0.3, 0.6, 0.9, 1.2) if how == "end of input" else (0.3, 0.6, 0.9, 1.2):
        proc = subprocess.Popen(
            [sys.executable, "-m", "kmscli", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        if delay:
            assert _initialize_over(proc.stdin.fileno(), proc.stdout.fileno())["id"] == 1
            time.sleep(delay - 0.3 if delay > 0.3 else 0)
        if how == "sigterm":
            proc.terminate()
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, (delay, proc.stderr.read() if proc.stderr else b"")
        assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()
