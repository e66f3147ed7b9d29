"""The tool names below the registry come from one list (``server.activity.tool_names``), checked here against
the registry, and no module below the MCP layer spells a tool's name by hand."""

from __future__ import annotations

import ast
from pathlib import Path

from server.activity.tool_names import TOOL_NAMES
from server.mcp.tools import REGISTRY

REPO = Path(__file__).resolve().parents[2]
# the MCP layer is the registry itself; the migrations keep the names history wrote; the demo is an MCP client
ABOVE_OR_HISTORY = ("server/mcp/", "server/store/migrations.py", "server/activity/tool_names.py")


def test_every_name_in_the_list_is_a_registry_tool_in_its_order() -> None:
    """A renamed or removed tool fails here; a new one need not be listed until a lower layer names it (so a
    new tool stays its operation, its spec and its test)."""
    registry = [s.name for s in REGISTRY]
    assert set(TOOL_NAMES) <= set(registry), sorted(set(TOOL_NAMES) - set(registry))
    assert list(TOOL_NAMES) == [n for n in registry if n in TOOL_NAMES]
    assert len(TOOL_NAMES) == len(set(TOOL_NAMES))


def test_no_module_below_the_registry_spells_a_tool_name() -> None:
    spelled = []
    for path in sorted([*(REPO / "server").rglob("*.py"), *(REPO / "tui").rglob("*.py")]):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(ABOVE_OR_HISTORY):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in TOOL_NAMES:
                spelled.append(f"{rel}:{node.lineno} {node.value}")
    assert spelled == [], "take the name from server.activity.tool_names"
