"""The one tool registry: each tier's tools, in that tier's one ordered tuple, the tiers in chain order.

A tier's tuple lives in its module (``read_tools``, ``write_tools``, ``edit_tools``, ``organize_tools``),
beside (or, for the read tier, importing) each tool's spec and handler. Read tools come first: a host
that truncates the list keeps the safe ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from server.config.tiers import TIERS, Tier
from server.mcp.tools.base import ToolSpec, WriteSpec
from server.mcp.tools.edit_tools import EDIT_TOOLS
from server.mcp.tools.organize_tools import ORGANIZE_TOOLS
from server.mcp.tools.read_tools import READ_TOOLS
from server.mcp.tools.write_tools import WRITE_TOOLS
from server.writes import appliers


def build_registry(by_tier: Mapping[Tier, Sequence[ToolSpec]]) -> tuple[ToolSpec, ...]:
    """The tiers' tuples concatenated in chain order; ``ValueError`` for a spec filed under another tier
    or a name used twice (tests build registries with tools of their own the same way)."""
    registry = tuple(spec for tier in TIERS for spec in by_tier.get(tier, ()))
    for tier, specs in by_tier.items():
        misfiled = [s.name for s in specs if s.tier != tier]
        if misfiled:
            raise ValueError(f"{', '.join(misfiled)} filed under the {tier} tier but not of it")
    names = [s.name for s in registry]
    if len(set(names)) != len(names):
        raise ValueError(f"tool names used twice: {sorted({n for n in names if names.count(n) > 1})}")
    return registry


BY_TIER: dict[Tier, tuple[ToolSpec, ...]] = {
    "read": READ_TOOLS,
    "write": WRITE_TOOLS,
    "edit": EDIT_TOOLS,
    "organize": ORGANIZE_TOOLS,
}
REGISTRY: tuple[ToolSpec, ...] = build_registry(BY_TIER)
# a detached staged call is applied where the person decides it (server.writes.review): its tool, by name
appliers.provide(s for s in REGISTRY if isinstance(s, WriteSpec))


def tool_names(tier: Tier, registry: Sequence[ToolSpec] = REGISTRY) -> list[str]:
    """The names of ``tier``'s tools in ``registry``, in listing order (what tests enumerate)."""
    return [s.name for s in registry if s.tier == tier]
