"""The settings screen: the agent switches, the write allowlist and the write limits.

Same schema and same file as ``kms config`` (``server.config.settings``): values are checked
with ``parse_value`` as the person types, and only changed keys are saved, through
``set_value``, so defaults are not pinned into the file. A running agent session keeps
the settings it started with; the screen says so.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label, Select, Static

from server.config.schema import SettingsError, setting
from server.config.setting_row import AUTO
from server.config.settings import load_settings, set_value
from server.config.values import format_value, parse_value

KEYS = (
    "kms.enabled",
    "agent.read",
    "agent.write",
    "agent.edit",
    "agent.organize",
    "write.allowlist",
    "write.per_minute",
    "write.per_session",
    "write.approval",
    "write.approval_lines",
    "write.approval_timeout",
    "capture.enabled",
    "capture.folder",
    "capture.ask_agent",
    "capture.prompts",
)
NEXT_SESSION = "Changes apply from the next agent session on; running sessions keep their settings."


def _initial(key: str, entry: Any) -> str:
    """The control's starting text: what the FILE says (the environment is shown separately)."""
    s = setting(key)
    raw = entry.file_value
    if raw is None and entry.source != "file":
        if s.auto:
            return "auto"
        raw = s.default
    if raw is AUTO:
        return "auto"
    if s.type == "bool":
        return "true" if raw else "false"
    if s.type == "globs":
        return " ".join(raw or [])
    return str(raw)


def _items(key: str, text: str) -> list[str]:
    """Control text -> the values ``parse_value``/``set_value`` take (globs: one per word)."""
    return text.split() if setting(key).type == "globs" else [text]


class SettingsScreen(Screen[bool]):
    """Edit, validate, save. Dismisses with True when something was saved."""

    BINDINGS = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "close", "Back"),
    ]

    def __init__(self, settings_path: Path, has_vault: bool) -> None:
        super().__init__()
        self.settings_path = settings_path
        self.has_vault = has_vault
        self.loaded = load_settings(settings_path, has_vault=has_vault)
        self.initial = {k: _initial(k, self.loaded.entries[k]) for k in KEYS}
        self.errors: dict[str, str] = {}
        self.saved = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="settings"):
            yield Static(Text.assemble(("Settings", "bold"), f"  ·  {self.settings_path}"), id="settings-title")
            yield Static(Text(NEXT_SESSION, style="italic"), id="settings-note")
            for key in KEYS:
                yield from self._row(key)
            with Horizontal(classes="buttons"):
                yield Button("Save (Ctrl+S)", id="save", variant="primary")
                yield Button("Back (Esc)", id="back")
            yield Static("", id="settings-status")
        yield Footer()

    def _row(self, key: str) -> ComposeResult:
        s = setting(key)
        entry = self.loaded.entries[key]
        wid = key.replace(".", "-")
        with Vertical(classes="setting"):
            label = Text(key, style="bold")
            if entry.source == "env":
                label.append(f"  (overridden by ${s.env} = {format_value(entry.value)})", style="yellow")
            yield Label(label)
            if s.type == "bool":
                options = [("on", "true"), ("off", "false")]
                if s.auto:
                    now = "on" if self.has_vault else "off"
                    options.insert(0, (f"auto (now {now}: on once a vault is registered)", "auto"))
                yield Select(options, value=self.initial[key], allow_blank=False, id=f"set-{wid}", compact=True)
            else:
                yield Input(
                    self.initial[key],
                    id=f"set-{wid}",
                    compact=True,
                    type="integer" if s.type == "int" else "text",
                    placeholder="folder globs, e.g. inbox drafts/*" if s.type == "globs" else s.valid_values(),
                )
            yield Static(Text(s.description, style="dim"), classes="setting-help")
            yield Static("", id=f"err-{wid}", classes="setting-error")

    # ----- values -------------------------------------------------------------------------------

    def value_text(self, key: str) -> str:
        control = self.query_one(f"#set-{key.replace('.', '-')}")
        if isinstance(control, Select):
            return str(control.value)
        assert isinstance(control, Input)
        return control.value

    def set_text(self, key: str, text: str) -> None:
        """Set a control (used by the command palette and tests)."""
        control = self.query_one(f"#set-{key.replace('.', '-')}")
        if isinstance(control, Select):
            control.value = text
        elif isinstance(control, Input):
            control.value = text

    def validate(self, key: str) -> str | None:
        """The schema's complaint about the current text, shown under the field."""
        problem: str | None
        try:
            parse_value(key, _items(key, self.value_text(key)))
        except SettingsError as e:
            problem = str(e)
        else:
            problem = None
        if problem:
            self.errors[key] = problem
        else:
            self.errors.pop(key, None)
        err = self.query_one(f"#err-{key.replace('.', '-')}", Static)
        err.update(Text(f"✗ {problem}", style="bold red") if problem else "")
        err.display = bool(problem)
        return problem

    def changed(self) -> list[str]:
        return [k for k in KEYS if self.value_text(k).strip() != self.initial[k].strip()]

    def on_mount(self) -> None:
        for key in KEYS:
            self.validate(key)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._revalidate(event.input.id)

    def on_select_changed(self, event: Select.Changed) -> None:
        self._revalidate(event.select.id)

    def _revalidate(self, control_id: str | None) -> None:
        for key in KEYS:
            if control_id == f"set-{key.replace('.', '-')}":
                self.validate(key)

    # ----- actions ------------------------------------------------------------------------------

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.run_worker(self.action_save(), exclusive=True, group="settings")
        else:
            self.action_close()

    async def action_save(self) -> None:
        status = self.query_one("#settings-status", Static)
        problems = [p for k in KEYS if (p := self.validate(k))]
        if problems:
            status.update(Text(f"Not saved: fix {len(problems)} value(s) first.", style="bold red"))
            return
        todo = self.changed()
        if not todo:
            status.update(Text("Nothing changed.", style="dim"))
            return
        items = {key: _items(key, self.value_text(key)) for key in todo}  # read widgets on this thread
        try:
            warnings = await asyncio.to_thread(self._save, items)
        except SettingsError as e:
            status.update(Text(f"Not saved: {e}", style="bold red"))
            return
        self.saved = True
        for key in todo:
            self.initial[key] = self.value_text(key)
        text = Text(f"✓ Saved {', '.join(todo)} to {self.settings_path}. {NEXT_SESSION}", style="bold green")
        for w in warnings:
            text.append(f"\n⚠ {w}", style="yellow")
        status.update(text)
        self.app.notify(f"Saved {', '.join(todo)}. {NEXT_SESSION}", title="Settings")

    def _save(self, items: dict[str, list[str]]) -> list[str]:
        """Runs in a thread: the config file is locked, read, rewritten atomically per key."""
        warnings: list[str] = []
        for key, values in items.items():
            warnings += set_value(key, values, path=self.settings_path, has_vault=self.has_vault)
        return list(dict.fromkeys(warnings))

    def action_close(self) -> None:
        self.dismiss(self.saved)
