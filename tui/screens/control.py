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
            o, oskip = len(p.get("outside", [])), len(p.get("outsideSkip", []))
            if o:  # the notes the session changed outside kms (its agent's own Edit/Write)
                head = f"Restore {o} note(s) changed outside kms" + (
                    f", then revert {n} change(s), newest first; every one is recorded as yours."
                    if n
                    else "; every restore is recorded as yours."
                )
            elif n:
                head = f"Revert {n} change(s), newest first; every revert is recorded as yours."
            else:
                head = "Nothing of this session can be reverted."
            m += oskip
            yield Label(
                Text(head + (f" {m} cannot be reverted (listed, left as they are)." if m else ""), style="bold")
            )
            with VerticalScroll(id="undo-list"):
                yield Static(self._lines())
            with Horizontal(classes="buttons"):
                if n or o:
                    yield Button(f"Undo {n + o} (y)", id="confirm", variant="error")
                yield Button("Cancel (n)", id="cancel", variant="primary")
        yield Footer()

    def _outside(self, t: Text, item: dict[str, Any]) -> None:
        t.append(f"{item['vault']}:{item['path']}")
        t.append(f" · {item['kind']} ({item['tool']}) · {humanize.ago(item['at'], self.now)}", style="dim")
        does = {
            "restore": f"back to version {item.get('version')}",
            "recreate": f"created again (version {item.get('version')})",
            "trash": "to the trash (the session created it)",
        }.get(item.get("action") or "")
        if does:
            t.append(f" · {does}, {item['sizeChange']:+d} bytes", style="dim")
        if item.get("covers"):
            t.append(" · also takes back " + ", ".join(f"#{c['invocationId']}" for c in item["covers"]), style="dim")

    def _lines(self) -> Text:
        t = Text()
        for item in self.plan.get("outside", []):
            t.append("✓ ", style="bold green")
            self._outside(t, item)
            t.append("\n")
        for item in self.plan.get("outsideSkip", []):
            t.append("✗ ", style="bold red")
            self._outside(t, item)
            t.append(f": {item['reason']}\n", style="red")
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
        if self.plan["revert"] or self.plan.get("outside"):
            self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)
