"""The Sessions table's controls: confirm a revoke, preview and confirm undoing a whole session."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Label, Static

from server import humanize
from tui.screens.modals import YesNoScreen


class ConfirmScreen(YesNoScreen):
    """A yes/no question (``y`` / ``n``)."""

    def __init__(self, title: str, question: str, yes: str) -> None:
        super().__init__()
        self.title_text, self.question, self.yes = title, question, yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = self.title_text
            yield Label(Text(self.question))
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="confirm", variant="error")
                yield Button("Cancel (n)", id="cancel", variant="primary")
        yield Footer()


class UndoScreen(ModalScreen[bool]):
    """What undoing a session would revert (newest first) and what it cannot, each with why; ``y`` undoes
    the revertible part."""

    BINDINGS = [Binding("y", "confirm", "Undo"), Binding("n,escape", "cancel", "Cancel")]

    def __init__(self, plan: dict[str, Any], now: float) -> None:
        super().__init__()
        self.plan, self.now = plan, now

    def compose(self) -> ComposeResult:
        p = self.plan
        with Vertical(id="dialog", classes="wide") as box:
            box.border_title = f"Undo session {p['sessionId']}"
            n, m = len(p["revert"]), len(p["skip"])
            head = (
                f"Revert {n} change(s), newest first; every revert is recorded as yours."
                if n
                else "Nothing of this session can be reverted."
            )
            yield Label(
                Text(head + (f" {m} cannot be reverted (listed, left as they are)." if m else ""), style="bold")
            )
            with VerticalScroll(id="undo-list"):
                yield Static(self._lines())
            with Horizontal(classes="buttons"):
                if n:
                    yield Button(f"Undo {n} (y)", id="confirm", variant="error")
                yield Button("Cancel (n)", id="cancel", variant="primary")
        yield Footer()

    def _lines(self) -> Text:
        t = Text()
        for item in self.plan["revert"]:
            t.append("✓ ", style="bold green")
            t.append(f"#{item['invocationId']} {item['tool']} {item['vault']}:{item['path']}")
            t.append(f" · {humanize.ago(item['at'], self.now)}", style="dim")
            if item.get("reason"):
                t.append(f" ({item['reason']})", style="dim")
            t.append("\n")
        for item in self.plan["skip"]:
            t.append("✗ ", style="bold red")
            t.append(f"#{item['invocationId']} {item['tool']} {item['vault']}:{item['path']}")
            t.append(f": {item['reason']}\n", style="red")
        return t

    @on(Button.Pressed, "#confirm")
    def action_confirm(self) -> None:
        if self.plan["revert"]:
            self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)
