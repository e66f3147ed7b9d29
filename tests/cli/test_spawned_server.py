"""The kms server as ``kms claude`` and the ``mcp-config`` snippets start it: a subprocess, exactly as composed.

Subprocesses because what is tested is the process boundary: the environment the composer writes, read
by the real ``kms mcp``; its exit code and stderr; and which modules the child imports from where.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from kmscli.compose import Session, kms_server, standalone_kms_entry
from server.config import settings as st
from server.mcp.tools import tool_names
from server.store.db import rows

ALL_TOOLS = {*tool_names("read"), *tool_names("write")}  # the write tier (edit and organize are off)


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("KMS_", "PYTHON"))}


def hostile_project(root: Path) -> Path:
    """A project whose own ``server`` (module and package) and ``kmscli`` would run inside a careless kms."""
    marker = root / "marker"
    root.mkdir()
    (root / "server").mkdir()
    (root / "kmscli").mkdir()
    for module in ("server.py", "server/__init__.py", "kmscli/__init__.py", "mcp_types.py"):
        (root / module).write_text(f"open({str(marker)!r}, 'a').write({module!r} + '\\n')\n")
    return marker


async def tools_and_refusals(entry: dict[str, Any], cwd: Path, env: dict[str, str]) -> tuple[set[str], dict, dict]:
    """The tools listed, a write outside the allowlist, and a listing of another vault, over stdio."""
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**entry["env"], **env}, cwd=str(cwd)
    )
    async with Client(params, read_timeout_seconds=30) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        write = await client.call_tool("kms_create", {"title": "Nope", "folder": "elsewhere"})
        other = await client.call_tool("kms_list_recent", {"vault": "elsewhere"})
        assert write.is_error and other.is_error
        return names, write.structured_content, other.structured_content


async def test_composed_server_runs_isolated_and_as_the_launcher_meant(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    marker = hostile_project(tmp_path / "project")
    cfg = tmp_path / "config.toml"
    st.set_value("agent.write", "on", path=cfg, env={}, has_vault=True)
    st.set_value("write.allowlist", "drafts", path=cfg, env={}, has_vault=True)
    st.set_value("write.per_minute", "5", path=cfg, env={}, has_vault=True)
    settings = st.load_settings(cfg, {}, has_vault=True)
    session = Session("s-spawned", db_path, tmp_path / "project", vault="sample")
    built = kms_server(settings, session)
    assert built is not None
    name, entry = built
    cfg.unlink()  # the session runs on what was composed, not on the file as it is later
    names, refusal, other = await tools_and_refusals(
        entry, tmp_path / "project", {"PYTHONPATH": str(tmp_path / "project")}
    )
    assert not marker.exists(), marker.read_text()
    assert names == ALL_TOOLS  # writes on, as composed (the file that said so is gone)
    assert refusal["error"] == "folder-denied" and refusal["allowed"] == ["drafts"]
    assert other["error"] == "invalid-input" and "scoped to vault 'sample'" in other["message"]
    assert rows(indexed, "SELECT session_id, tool, error FROM tool_invocations") == [
        {"session_id": "s-spawned", "tool": "kms_create", "error": "folder-denied"}
    ]


async def test_standalone_snippet_runs_isolated_and_reads_the_settings_file(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    marker = hostile_project(tmp_path / "project")
    cfg = tmp_path / "config.toml"
    st.set_value("agent.write", "on", path=cfg, env={}, has_vault=True)
    st.set_value("write.allowlist", "inbox", path=cfg, env={}, has_vault=True)
    entry = standalone_kms_entry(st.load_settings(cfg, {}, has_vault=True), db_path)
    assert set(entry["env"]) == {"KMS_DB_PATH", "KMS_CONFIG"}
    names, refusal, other = await tools_and_refusals(
        entry, tmp_path / "project", {"PYTHONPATH": str(tmp_path / "project")}
    )
    assert not marker.exists(), marker.read_text()
    assert names == ALL_TOOLS and refusal["allowed"] == ["inbox"]
    assert other["error"] == "not-found", "no scope: a vault of that name simply does not exist"


def test_without_isolation_the_project_would_run_inside_kms(tmp_path: Path) -> None:
    """The control for the two tests above: the same project does shadow a plain ``python -m kmscli``."""
    marker = hostile_project(tmp_path / "project")
    subprocess.run(
        [sys.executable, "-m", "kmscli", "mcp"],
        cwd=tmp_path / "project",
        env=base_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert marker.exists()


BAD = [
    ("KMS_ENABLED", "maybe"),
    ("KMS_AGENT_TOOLS_ENABLED", "2"),
    ("KMS_AGENT_WRITE_TOOLS_ENABLED", "auto"),
    ("KMS_WRITE_ALLOWLIST", "drafts/**"),
    ("KMS_WRITE_PER_MINUTE", "abc"),
    ("KMS_WRITE_PER_MINUTE", "0"),
    ("KMS_WRITE_PER_SESSION", "-5"),
    ("KMS_EMBED_ENABLED", "sometimes"),
    ("KMS_SERVERS_PLAYWRIGHT_ENABLED", "x"),
    ("KMS_SERVERS_FILESYSTEM_ENABLED", "?"),
    ("KMS_LOG_LEVEL", "loud"),
    ("KMS_EMBED_DOWNLOAD", "perhaps"),
    ("KMS_VAULT", "no-such-vault"),
    ("KMS_WRITE_PER_MINUT", "3"),  # unknown
]


@pytest.mark.parametrize(("var", "value"), BAD)
def test_a_bad_variable_stops_kms_mcp_with_one_line(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, var: str, value: str
) -> None:
    value = value.format(tmp=tmp_path)
    env = {**base_env(), "KMS_DB_PATH": str(db_path), "KMS_CONFIG": str(tmp_path / "config.toml"), var: value}
    run = subprocess.run(
        [sys.executable, "-E", "-P", "-m", "kmscli", "mcp"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith("kms mcp: refusing to start: ") and f"{var}={value!r}" in line and "Valid: " in line


def test_a_db_path_kms_cannot_use_serves_tools_that_say_so(tmp_path: Path) -> None:
    """A folder for KMS_DB_PATH: not a refusal (the host would show the agent no tools) but the stubs of
    ``server.mcp.unavailable``, with one line on stderr naming the variable to fix."""
    env = {**base_env(), "KMS_DB_PATH": str(tmp_path), "KMS_CONFIG": str(tmp_path / "config.toml")}
    run = subprocess.run(
        [sys.executable, "-E", "-P", "-m", "kmscli", "mcp"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and run.stdout == "" and "Traceback" not in run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith("kms mcp: the database cannot be used (") and "KMS_DB_PATH" in line


def test_auto_is_a_valid_switch_value(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    env = {
        **base_env(),
        "KMS_DB_PATH": str(db_path),
        "KMS_CONFIG": str(tmp_path / "config.toml"),
        "KMS_ENABLED": "auto",
        "KMS_AGENT_TOOLS_ENABLED": "auto",
    }
    run = subprocess.run(
        [sys.executable, "-E", "-P", "-m", "kmscli", "mcp"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr
