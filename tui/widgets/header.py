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
        t = Text()
        t.append(" kms ", style="bold reverse")
        vaults = ov.get("vaults") or []
        names = ", ".join(v["name"] for v in vaults) or "no vault"
        t.append(f" {names}", style="bold")
        t.append(f" · {ov.get('notes', 0)} notes · indexed {fmt.ago(ov.get('lastIndexedAt'), self.state.clock())}")
        if st is not None:
            t.append("  │ ", style="dim")
            t.append_text(fmt.flag("kms", st.get("kms.enabled")))
            t.append(" ")
            t.append_text(fmt.flag("read", st.active("agent.read")))
            t.append(" ")
            t.append_text(fmt.flag("write", st.active("agent.write")))
            allow = st.get("write.allowlist")
            t.append("  │ allow: ", style="dim")
            t.append(" ".join(allow) if allow else "(none)", style="bold" if allow else "dim")
            t.append(f"  │ {st.get('write.per_minute')}/min {st.get('write.per_session')}/session", style="dim")
            if st.problems:
                t.append("  ⚠ settings problem", style="bold yellow")
        return t
