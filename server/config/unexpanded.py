"""Detect ``${VAR}`` left unexpanded by an MCP host; imported before anything heavy so the
server refuses at once instead of after loading the SDK."""

from __future__ import annotations

import re
from collections.abc import Mapping

_UNEXPANDED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def find_unexpanded(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """Arguments or KMS_* variables still holding ``${VAR}`` (a host that did not expand them)."""
    bad = [f"argument {a!r}" for a in argv if _UNEXPANDED.search(a)]
    bad += [f"{k}={v!r}" for k, v in env.items() if k.startswith("KMS_") and _UNEXPANDED.search(v)]
    return bad


def refusal(bad: list[str]) -> str:
    return (
        "kms mcp: refusing to start: these still hold an unexpanded ${VAR} (the MCP host did not expand "
        "them): " + "; ".join(bad) + "\nFix the host's config (write the real value) and restart.\n"
    )
