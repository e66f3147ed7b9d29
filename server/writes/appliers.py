"""The write tools a detached staged call can be applied with, by name: a seam, not a registry.

The tools' handlers and input models live in the MCP adapter's registry (``server.mcp.tools``), a layer above
the write path, yet a detached call is applied wherever the person decides it (``server.writes.review``): the
CLI, the dashboard, the service's review page. The registry hands its write tools down here when it is
imported (``provide``); a front end that decides imports ``server.mcp.tools`` first. This module imports
nothing heavy: the registry imports it at start, before any write module is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server.writes.guard import WriteTool

_tools: dict[str, WriteTool] = {}
_actors: dict[str, str] = {}


def provide(tools: Iterable[WriteTool], *, actor: str = "agent") -> None:
    """Make ``tools`` available to decisions in this process, by name (a later one of a name replaces it).
    ``actor``: who its provenance row names as the writer (``capture``: kms's own session note, which
    ``server.writes.capture`` provides)."""
    for t in tools:
        _tools[t.name] = t
        _actors[t.name] = actor


def named(name: str) -> WriteTool | None:
    """The write tool called ``name``, if one was provided."""
    return _tools.get(name)


def actor_of(name: str) -> str:
    """Who writes with the tool called ``name`` (``provide``): the agent unless it is kms's own."""
    return _actors.get(name, "agent")
