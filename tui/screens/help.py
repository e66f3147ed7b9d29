"""``?``: what the panels mean, what the symbols mean, and every key."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from tui import format as fmt

KEYS: list[tuple[str, str]] = [
    ("↑ ↓ PgUp PgDn", "move in a table (older rows load at the end of the feed)"),
    ("Enter", "feed: the invocation in full · sessions: show only that session's writes"),
    ("/", "search the provenance (tool, title, input, inserted text, message)"),
    ("u", "review and revert the selected agent write (preview, then confirm)"),
    ("o", "open the note as it is now, inserted text selected"),
    ("e", "edit the note in $EDITOR"),
    ("r", "notes the session's agent read"),
    ("x", "clear search and filters"),
    ("1 2 3", "focus sessions, feed, detail"),
    ("s", "settings (agent switches, allowlist, write limits)"),
    ("t", "the trash: what agents trashed, from which session, when; r restores one, h its history"),
    ("h", "the selected row's note: every version kms kept, who made it, a diff; r restores one"),
    ("k", "the kms service and its tokens: v revokes one, p pauses or resumes its session"),
    ("", "  c: a pairing code for remote mode · d: pair a phone with the review pages (link and QR code)"),
    ("c", "conflict copies a sync tool made (⚠ in the top bar): a diff; m keeps mine, t theirs, b both"),
    ("p", "writes waiting for your approval: a approves, x rejects (with a reason)"),
    ("P V U", "sessions: pause/resume, revoke, undo the whole session (preview, then confirm)"),
    ("Ctrl+P", "command palette"),
    ("?", "this help"),
    ("q", "quit"),
]


def help_text() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    grid.add_row(Text("Keys", style="bold underline"), "")
    for key, what in KEYS:
        grid.add_row(key, what)
    grid.add_row("", "")
    grid.add_row(Text("Status", style="bold underline"), "")
    for status in fmt.STATUS_STYLE:
        grid.add_row(fmt.status_text(status), status)
    grid.add_row(fmt.status_text("success", reverted=True), "succeeded, then taken back by a revert")
    grid.add_row(fmt.status_text("success", overwritten=True), "succeeded, then a later save dropped its text")
    grid.add_row(fmt.outside_status(120), "the session's agent changed the note outside kms (u: the session's undo)")
    grid.add_row("", "")
    grid.add_row(Text("Sessions", style="bold underline"), "")
    for state, (symbol, style) in fmt.STATE_STYLE.items():
        grid.add_row(
            Text(f"{symbol} {state}", style=style),
            {
                "live": "reported in during the last 45 s",
                "idle": "not ended, quiet for a while, its process is still there",
                "gone": "not ended, its process is gone (crashed)",
                "ended": "ended (exit code shown when not 0)",
            }[state],
        )
    grid.add_row("This minute", "writes in the last 60 s / the per-minute limit")
    grid.add_row("Total", "writes in the session / the per-session limit")
    grid.add_row("Can write", "now, or when a limited session may write again (never: session total used up)")
    return grid


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="wide") as box:
            box.border_title = "kms dashboard · help"
            yield Static(help_text())
        yield Footer()
