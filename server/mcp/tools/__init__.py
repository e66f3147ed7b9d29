"""The one tool registry: every MCP tool is one ``ToolSpec`` here, listed in this order."""

from __future__ import annotations

from server.mcp.tools.base import ToolSpec
from server.mcp.tools.organize_tools import EDIT_TOOLS, LINK_TOOLS, ORGANIZE_TOOLS
from server.mcp.tools.orient_tools import ORIENT_TOOLS
from server.mcp.tools.read_tools import READ_TOOLS
from server.mcp.tools.recall_tools import RECALL_TOOL
from server.mcp.tools.semantic_tool import SEMANTIC_TOOL
from server.mcp.tools.write_tools import WRITE_TOOLS

_START, *_ORIENT_READ, _REMEMBER = ORIENT_TOOLS
REGISTRY: list[ToolSpec] = [_START, *READ_TOOLS[:5], SEMANTIC_TOOL, RECALL_TOOL, *READ_TOOLS[5:], *_ORIENT_READ,
                            *WRITE_TOOLS, _REMEMBER, *LINK_TOOLS, *EDIT_TOOLS, *ORGANIZE_TOOLS]
