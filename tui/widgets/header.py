"""The top line: vaults, note count, last indexed, agent switches and the allowlist as they
stand in the settings file (what the NEXT session will get)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from tui import format as fmt
from tui.state import DashboardState


class TopBar(Static):
    def __init__(self, state: DashboardState, **kwargs: Any) -> None:
        super().__init__("kms", **kwargs)
        self.state = state

    def show(self) -> None:
        self.update(self.render_text())

    def render_text(self) -> Text:
        ov, st = self.state.overview, self.state.settings
        now = self.state.clock()
        t = Text()
        t.append(" kms ", style="bold reverse")
        names = ", ".join(v["name"] for v in ov.get("vaults") or []) or "no vault"
        t.append(f" {names}", style="bold")
        t.append(f" · {ov.get('notes', 0)} notes · indexed {fmt.clock_time(ov.get('lastIndexedAt'), now)}")
        if st is None:
            return t
        t.append(" │ ", style="dim")
        if not st.get("kms.enabled"):
            t.append_text(fmt.flag("kms", False))
            t.append(" ")
        t.append_text(fmt.flag("read", st.active("agent.read")))
        t.append(" ")
        t.append_text(fmt.flag("write", st.active("agent.write")))
        allow = st.get("write.allowlist")
        t.append(" │ allow ", style="dim")
        t.append(" ".join(allow) if allow else "(none)", style="bold" if allow else "dim")
        t.append(f" │ {st.get('write.per_minute')}/min {st.get('write.per_session')}/session", style="dim")
        if st.problems:
            t.append(" │ ⚠ settings file problem", style="bold yellow")
        return t
