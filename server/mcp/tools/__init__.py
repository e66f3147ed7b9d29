"""The one tool registry: each tier's tools, in that tier's one ordered tuple, the tiers in chain order.

A tier's tuple lives in its module (``read_tools``, ``write_tools``, ``edit_tools``, ``organize_tools``),
beside (or, for the read tier, importing) each tool's spec and handler. Read tools come first: a host
that truncates the list keeps the safe ones.
"""

from __future__ import annotations

from server.config.tiers import TIERS, Tier
from server.mcp.tools.base import ToolSpec
from server.mcp.tools.edit_tools import EDIT_TOOLS
from server.mcp.tools.organize_tools import ORGANIZE_TOOLS
from server.mcp.tools.read_tools import READ_TOOLS
from server.mcp.tools.write_tools import WRITE_TOOLS

BY_TIER: dict[Tier, tuple[ToolSpec, ...]] = {"read": READ_TOOLS, "write": WRITE_TOOLS, "edit": EDIT_TOOLS,
                                             "organize": ORGANIZE_TOOLS}
REGISTRY: tuple[ToolSpec, ...] = tuple(spec for tier in TIERS for spec in BY_TIER[tier])


def tool_names(tier: Tier, registry: tuple[ToolSpec, ...] = REGISTRY) -> list[str]:
    """The names of ``tier``'s tools in ``registry``, in listing order (what tests and docs enumerate)."""
    return [s.name for s in registry if s.tier == tier]
