"""The feed's tool column shows every name whole: `restore` read `restor`, `capture` `captur`."""

from __future__ import annotations

from server.mcp.tools import REGISTRY
from server.writes.undo.restore import TOOL_RESTORE
from tui.format import TOOL_CELLS, short_tool


def test_every_tool_and_actor_name_fits_the_feeds_column_whole() -> None:
    names = [t.name for t in REGISTRY] + [TOOL_RESTORE, "session-note", "revert"]
    shown = {name: short_tool(name) for name in names}
    assert {n: s for n, s in shown.items() if len(s) > TOOL_CELLS} == {}
    assert len(set(shown.values())) == len(shown), "two tools read the same"
