"""The one tool registry: every MCP tool is one ``ToolSpec`` here, listed in this order."""

from __future__ import annotations

from server.tools.base import ToolSpec
from server.tools.read_tools import READ_TOOLS


def _registry() -> list[ToolSpec]:
    tools = list(READ_TOOLS)
    try:
        from server.tools.semantic_tool import SEMANTIC_TOOL
    except ImportError:  # pragma: no cover - until the semantic tool lands
        pass
    else:
        tools.insert(5, SEMANTIC_TOOL)
    try:
        from server.tools.write_tools import WRITE_TOOLS
    except ImportError:  # pragma: no cover
        pass
    else:
        tools.extend(WRITE_TOOLS)
    return tools


REGISTRY: list[ToolSpec] = _registry()
