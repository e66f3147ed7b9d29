"""``kms mcp``'s start-up (issue 14, speed): what runs before the first ``tools/list`` answer, and what waits.

The background work (the semantic model's start, the write modules' import) begins once the first
``tools/list`` answer is written, at the first call, or after a fallback delay; the SDK is loaded without
its client and HTTP transports. Measured by ``bench/bench_mcp.py``; checked here by behaviour.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import apsw
from support.mcp_stdio import server_env

from server.mcp.serve import Deferred

REPO = Path(__file__).resolve().parents[2]
HANDSHAKE = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]


def test_background_starts_once_a_moment_after_the_tool_list_is_written() -> None:
    fired = threading.Event()
    d = Deferred(fired.set, after_s=3600, grace_s=3600)
    d.wrote()  # the initialize answer: not yet
    d.listed()
    assert not fired.is_set()  # the answer is built, not yet written
    d.wrote()
    assert not fired.is_set() and d.reason is None  # the host gets a moment to take the list in
    soon = Deferred(fired.set, after_s=3600, grace_s=0.0)
    soon.listed()
    soon.wrote()
    soon.wrote()
    assert fired.wait(30)
    soon.now()
    assert soon.reason == "listed"
    d.now()  # a call does not wait for the grace
    assert d.reason == "called"


def test_background_starts_at_the_first_call_without_a_listing() -> None:
    started: list[int] = []
    d = Deferred(lambda: started.append(1), after_s=3600)
    d.arm()
    d.now()
    d.listed()
    d.wrote()
    assert started == [1] and d.reason == "called"


def test_background_starts_after_the_delay_when_nothing_is_asked() -> None:
    fired = threading.Event()
    d = Deferred(fired.set, after_s=0.0)
    d.arm()
    assert fired.wait(30)
    d.now()
    assert d.reason == "timer"


def _env(db_path: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("KMS_")},
        **server_env(db_path, tmp_path, KMS_AGENT_WRITE_TOOLS_ENABLED="1", KMS_LOG_LEVEL="DEBUG", **extra),
    }


def _serve(db_path: Path, tmp_path: Path, code: str, **extra: str) -> tuple[list[dict], str]:
    stdin = "".join(json.dumps(m) + "\n" for m in HANDSHAKE)
    out = subprocess.run(
        [sys.executable, "-E", "-P", "-c", code],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(db_path, tmp_path, **extra),
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()], out.stderr


def test_kms_mcp_lists_every_tool_without_the_sdk_client_and_starts_the_rest_after(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """The real server process: every tier on, the list answered, the background work begun because the list
    was written (not by the fallback timer), and the SDK's client and high-level server never loaded."""
    code = (
        "import sys; from server.mcp.serve import main; rc = main([]); "
        "sys.stderr.write('\\nLOADED ' + ' '.join(sorted(m for m in sys.modules if m in "
        "{'mcp.client', 'mcp.client.stdio', 'mcp.server.mcpserver', 'mcp.server.lowlevel', 'mcp_types'})) "
        "+ '\\n'); sys.exit(rc)"
    )
    env = _env(db_path, tmp_path, KMS_AGENT_EDIT_TOOLS_ENABLED="1", KMS_AGENT_ORGANIZE_TOOLS_ENABLED="1")
    proc = subprocess.Popen(
        [sys.executable, "-E", "-P", "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in HANDSHAKE))
        proc.stdin.flush()
        while (reply := json.loads(proc.stdout.readline())).get("id") != 2:
            pass
        seen: list[str] = []  # the server keeps running: its background work starts a moment after the list
        while not any("starting the background work" in line for line in seen):
            line = proc.stderr.readline()
            assert line, "".join(seen)
            seen.append(line)
        _rest, err = proc.communicate(timeout=60)  # closes stdin: the end of the session
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    listed = reply["result"]["tools"]
    names = {t["name"] for t in listed}
    assert {"kms_start", "kms_search", "kms_semantic_search", "kms_append", "kms_move"} <= names
    assert all("$ref" not in json.dumps(t["inputSchema"]) for t in listed)
    assert "starting the background work (listed)" in seen[-1]
    assert err.strip().splitlines()[-1] == "LOADED mcp.server.lowlevel mcp_types"


def test_a_process_that_uses_the_sdk_client_keeps_the_whole_sdk(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """``import_sdk_lean`` leaves an already imported SDK alone: ``mcp``'s names stay importable."""
    code = (
        "import sys, mcp; from server.mcp.serve import import_sdk_lean; import_sdk_lean(); "
        "from mcp import Client; from mcp.server import Server; from mcp.server.lowlevel import Server as S; "
        "assert Server is S; print('{}')"
    )
    replies, _err = _serve(db_path, tmp_path, code)
    assert replies == [{}]


def test_only_bounded_index_reads_run_on_the_event_loop(db_path: Path) -> None:
    """Only the folder listing runs inline (no thread hand-offs); every other read keeps its worker thread, so a
    slow one (a semantic search, an inventory walk) never holds up the session's other calls, and the writes go
    through ``call_write`` (worker threads, in the session's order): a write can wait on a lock or the person."""
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.dispatch import ToolRunner

    runner = ToolRunner(
        SessionConfig.from_env({"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]}, watch=False)
    )
    try:
        inline_reads = {s.name for s in runner.registry if s.tier == "read" and runner.runs_inline(s.name)}
        assert inline_reads == {"kms_list_folder"}
        assert not any(runner.runs_inline(s.name) for s in runner.registry if s.tier != "read")
        assert {s.name for s in runner.registry if runner.is_write(s.name)} == {
            s.name for s in runner.registry if s.tier != "read"
        }
    finally:
        runner.close()


def test_an_sdk_whose_server_needs_its_package_init_is_imported_whole() -> None:
    """If an SDK release's low-level server takes a name from the ``mcp`` package (the lean import's one
    assumption), ``import_sdk_lean`` gives up and the SDK imports as usual: the server still starts."""
    code = textwrap.dedent("""
        import sys
        import importlib.abc

        class FailOnce(importlib.abc.MetaPathFinder):
            failed = False
            def find_spec(self, name, path=None, target=None):
                if name == "mcp.server.lowlevel" and not FailOnce.failed:
                    FailOnce.failed = True
                    raise ImportError("cannot import name 'X' from 'mcp' (unexecuted package)")
                return None

        sys.meta_path.insert(0, FailOnce())
        from server.mcp.serve import import_sdk_lean
        import_sdk_lean()
        assert FailOnce.failed and "mcp" not in sys.modules
        from mcp import Client
        from mcp.server.lowlevel import Server
        print("whole SDK", Client.__name__, Server.__name__)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "whole SDK Client Server"
