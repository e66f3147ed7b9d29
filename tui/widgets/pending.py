"""The calls waiting for the person's approval: the dashboard's badge, the list and the diff of one."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable, Static

from server import humanize
from server.activity.approvals import Pending


class PendingBadge(Static):
    """One line above the feed while something waits ("⚑ 2 writes wait for your approval"); hidden otherwise."""

    DEFAULT_CSS = """
    PendingBadge { height: 1; padding: 0 1; background: $warning 40%; display: none; }
    """

    def show(self, count: int) -> None:
        self.display = count > 0
        if count:
            self.update(
                Text.assemble(
                    ("⚑ ", "bold"),
                    (f"{count} write{' waits' if count == 1 else 's wait'} for your approval", "bold"),
                    "  press p to review",
                )
            )


class PendingTable(DataTable[Any]):
    """One row per waiting call, oldest first, keyed by its pending id."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.border_title = "Waiting for your approval"

    def on_mount(self) -> None:
        for label, key, width in (
            ("#", "id", 4),
            ("Session", "session", 13),
            ("Tool", "tool", 16),
            ("Files", "files", 5),
            ("Lines", "lines", 5),
            ("Waiting", "age", 7),
            ("Left", "left", 5),
            ("Note", "note", 24),
        ):
            self.add_column(label, key=key, width=width)

    def show(self, items: list[Pending], now: float) -> None:
        selected = self.selected_id
        self.clear()
        for p in items:
            first = next((f for f in p.files if not f.get("hidden")), p.files[0] if p.files else {})
            where = first.get("path", "")
            if first.get("newPath"):
                where = f"{where} → {first['newPath']}"
            self.add_row(
                str(p.id),
                p.session_id,
                p.tool,
                str(len(p.files)),
                str(p.lines),
                humanize.duration(max(0.0, now - p.created_at)),
                humanize.duration(max(0.0, p.expires_at - now)),
                where,
                key=str(p.id),
            )
        if selected is not None and str(selected) in self.rows:
            self.move_cursor(row=self.get_row_index(str(selected)), animate=False)

    @property
    def selected_id(self) -> int | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001 - no cursor row
            return None
        return int(key) if key is not None else None


def diff_text(p: Pending) -> Text:
    """The exact change, file by file, as a coloured unified diff, after who asked and with what input."""
    t = Text()
    t.append(f"#{p.id} {p.tool}", style="bold")
    t.append(f" · session {p.session_id} · {p.lines} line(s) in {len(p.files)} file(s)\n", style="dim")
    t.append("input: ", style="bold")
    t.append(p.input_summary + "\n")
    if p.asking_host:
        t.append("the agent's host is asking you about it too: the first decision wins\n", style="italic")
    if p.detached:  # a remote grant's: its agent was answered at once (server.writes.review)
        t.append("nobody waits on it: approving applies it now, exactly as shown\n", style="italic")
    if p.why:  # held although write.approval did not ask (server.vault.planted)
        t.append("held: ", style="bold yellow")
        t.append("looks like instructions to an agent (" + "; ".join(p.why) + ")\n", style="yellow")
    t.append("\n")
    for f in p.files:
        t.append(f"{f['vault']}:{f['path']}", style="bold cyan")
        if f.get("newPath"):
            t.append(f" → {f['newPath']}", style="bold cyan")
        t.append(
            f"  +{f['added']} -{f['removed']}" + ("  (hidden from agents)" if f.get("hidden") else "") + "\n",
            style="dim",
        )
        for line in f["diff"].splitlines():
            if line.startswith(("+++", "---")):
                continue
            style = (
                "green"
                if line.startswith("+")
                else "red"
                if line.startswith("-")
                else "cyan"
                if line.startswith("@@")
                else ""
            )
            t.append(line + "\n", style=style)
        t.append("\n")
    return t
