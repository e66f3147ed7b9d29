"""Locate the real Claude Code CLI and build an isolated, offline environment for running it in tests.

See tests/support/claude_e2e.md for what these settings are for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
NPM_PREFIX = REPO_ROOT / ".cache" / "npm"  # where scripts/fetch_claude.sh installs it
FETCH_SCRIPT = REPO_ROOT / "scripts" / "fetch_claude.sh"

# Variables of the calling environment that would change which account, model, config or mode the
# child claude uses (e.g. when the tests themselves run under Claude Code); never passed on.
_STRIP_PREFIXES = ("ANTHROPIC_", "CLAUDE", "AWS_BEARER_TOKEN_BEDROCK", "VERTEX_", "MCP_", "OTEL_")


def claude_bin() -> Path:
    """The ``claude`` executable: ``$KMS_CLAUDE_BIN``, else the repo-local npm install, else PATH.

    Raises FileNotFoundError (with the fix) when there is none; tests may turn that into a skip.
    """
    override = os.environ.get("KMS_CLAUDE_BIN")
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise FileNotFoundError(f"KMS_CLAUDE_BIN={override} is not an executable file")
        return path
    modules = NPM_PREFIX / "node_modules" / "@anthropic-ai"
    # bin/claude.exe is the native binary once the postinstall ran (a placeholder script otherwise);
    # the per-platform package always holds the real one.
    for candidate in [
        modules / "claude-code" / "bin" / "claude.exe",
        *sorted(modules.glob("claude-code-*/claude")),
    ]:
        if candidate.is_file() and os.access(candidate, os.X_OK) and _is_native(candidate):
            return candidate
    found = shutil.which("claude")
    if found:
        return Path(found)
    raise FileNotFoundError(f"Claude Code CLI not found: run {FETCH_SCRIPT} (or set KMS_CLAUDE_BIN)")


def _is_native(path: Path) -> bool:
    with path.open("rb") as f:
        magic = f.read(4)
    return magic in (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"MZ\x90\x00")  # ELF, Mach-O, PE


def claude_env(base_url: str, home: Path | str, **extra: str) -> dict[str, str]:
    """Environment for a non-interactive ``claude -p`` talking only to ``base_url`` (the fake API).

    ``home`` becomes HOME and the XDG base dirs, so neither claude nor the MCP servers it spawns (which
    inherit this environment) touch the real user's config. ``extra`` is added last (e.g.
    ``ENABLE_TOOL_SEARCH="false"``).
    """
    home = Path(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIP_PREFIXES)}
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "dummy",
            # no telemetry, error reports, auto-update or other calls to Anthropic's hosts
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            # wait for MCP servers to connect before the first request, so their tools are in it
            "MCP_CONNECTION_NONBLOCKING": "0",
            "MCP_TIMEOUT": "60000",  # ms for an MCP server to start (slow CI, cold imports)
        }
    )
    env.update(extra)
    return env


def claude_print_args(prompt: str, mcp_config: Path | str | None = None, allowed_tools: str = "mcp__kms") -> list[str]:
    """Arguments (after the executable) for one non-interactive turn with stream-json output."""
    args = ["-p", prompt]
    if mcp_config is not None:
        args += ["--mcp-config", str(mcp_config), "--strict-mcp-config"]
    return args + ["--allowedTools", allowed_tools, "--output-format", "stream-json", "--verbose"]


def stream_events(stdout: str) -> list[dict[str, Any]]:
    """The JSON lines of ``--output-format stream-json`` output.

    The first is ``{"type": "system", "subtype": "init", "mcp_servers": [{"name": "kms", "status": ...}]}``
    ("connected" / "failed"), the last ``{"type": "result", "subtype": "success", "result": <final text>}``.
    """
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def run_headless(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 200
) -> subprocess.CompletedProcess[str]:
    """One headless run (``claude -p`` or ``kms claude -- -p``): no terminal on stdin, output captured."""
    return subprocess.run(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
