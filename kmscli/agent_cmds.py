"""``kms mcp`` and ``kms hook`` as Typer commands: what ``kms --help`` documents. A host runs both without Typer
(``kmscli.entry`` starts them directly, for start-up time); these are the same entries by the slow road."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kmscli.hook_cmd import main as hook
from server.mcp.serve import main as serve

HOOK_CONTEXT_SETTINGS = {"ignore_unknown_options": True}  # the event's own options pass through to the hook


def mcp_cmd() -> None:
    """Serve the vault to an agent over MCP (stdio). Configured by KMS_* environment variables."""
    sys.exit(serve())


def hook_cmd(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="EVENT (session-start, user-prompt-submit, post-tool-use, pre-compact, post-compact, stop, "
            "session-end) [--contract FILE]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """An agent host's command hook: the event's JSON on stdin, kms's answer on stdout (docs/hooks.md).
    Fail-open: it always exits 0."""
    raise typer.Exit(hook(args or []))
