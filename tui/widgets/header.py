"""The top line: vaults, note count, last indexed, agent switches and the allowlist as they
stand in the settings file (what the NEXT session will get).

Always exactly one line: a wrapping header made the layout depend on when the settings
arrived. When the terminal is too narrow for everything, words go before facts: first the word
"indexed", then the long forms (``read ✓`` becomes ``r✓``, ``200/session`` becomes ``200/sess``: ``/s`` would
read as a rate per second). An empty allowlist lets agents write in any folder, and says so.
The switches, the limits and the allowlist always stay, in that order,
so at 80 columns only a long allowlist's tail ends in an ellipsis.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widget import Widget

from server import humanize
from server.index.overview import Overview, VaultSummary
from tui import format as fmt
from tui.state import DashboardState


class TopBar(Widget):
    DEFAULT_CSS = "TopBar { height: 1; }"

    def __init__(self, state: DashboardState, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state = state

    def show(self) -> None:
        self.refresh()

    def render(self) -> Text:
        width = self.content_size.width or 10_000
        for indexed_word, short in ((True, False), (False, False), (False, True)):
            text = self.render_text(indexed_word=indexed_word, short=short)
            if text.cell_len <= width:
                return text
        text.truncate(width, overflow="ellipsis")
        return text

    def render_text(self, *, indexed_word: bool = True, short: bool = False) -> Text:
        ov, st = self.state.overview or Overview(), self.state.settings
        now = self.state.clock()
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" kms ", style="bold reverse")
        names = ", ".join(v.name + _how_kept(v) for v in ov.vaults)
        t.append(f" {names or 'no vault'}", style="bold")
        indexed = "indexed " if indexed_word else ""
        t.append(f" · {ov.notes} notes · {indexed}{humanize.clock_time(ov.last_indexed_at, now)}")
        conflicts = sum(v.conflicts or 0 for v in ov.vaults)
        if conflicts:  # two versions of a note wait for the person (kms conflicts); agents may not write to it
            t.append(f" · ⚠ {conflicts} conflict{'s' if conflicts > 1 else ''} (c)", style="bold yellow")
        if ov.incomplete:  # a new vault between its two index transactions: searchable, links and tags to come
            t.append(f" · {', '.join(ov.incomplete)} searchable, building links and tags", style="bold yellow")
        if st is None:
            return t
        if st.problems:  # early, so a narrow terminal never cuts it off
            t.append(" │ ⚠ settings file problem", style="bold yellow")
        t.append(" │ ", style="dim")
        if not st.get("kms.enabled"):
            t.append_text(fmt.flag("kms", False))
            t.append(" ")
        t.append_text(fmt.flag("r" if short else "read", st.active("agent.read"), short))
        t.append(" ")
        t.append_text(fmt.flag("w" if short else "write", st.active("agent.write"), short))
        for flag, key in (("e" if short else "edit", "agent.edit"), ("o" if short else "organize", "agent.organize")):
            if st.active(key):  # shown once on, so the usual header stays as it was
                t.append(" ")
                t.append_text(fmt.flag(flag, True, short))
        per = "/sess" if short else "/session"
        t.append(f" │ {st.get('write.per_minute')}/min {st.get('write.per_session')}{per}", style="dim")
        allow = st.get("write.allowlist")
        t.append(" │ allow ", style="dim")
        t.append(" ".join(allow) if allow else "any folder", style="bold" if allow else "dim")
        return t


def _how_kept(v: VaultSummary) -> str:
    """What keeps a vault in sync and its git mode, after its name: `` (syncthing · git commit)``."""
    said = [v.sync.replace(",", "+")] if v.sync else []
    if v.git_on:
        said.append(f"git {v.git_mode}")
    return f" ({' · '.join(said)})" if said else ""
