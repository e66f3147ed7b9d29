"""The kms service and its tokens (``k``): whether the service runs, every token (label, kind, scopes, the
session it stands for, last use; a remote grant is one of kind ``remote``); revoke one after a yes, pause or
resume its session; ``c`` shows a pairing code for remote mode's consent page (as ``kms remote pair``).

The same core as ``kms service status`` and ``kms token list|revoke`` (``server.mcp.service`` state file,
``server.activity.tokens``) and ``kms session pause`` (``server.activity.control``). A session served by the
service shows in the dashboard's session list, feed, gauges and approvals like a stdio one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from server import humanize
from server.activity import control, remote_pairing, review_access, tokens
from server.config.settings import load_settings
from server.errors import KmsError
from tui.screens.control import ConfirmScreen
from tui.screens.modals import PairScreen

if TYPE_CHECKING:
    from tui.app import KmsDashboard

HINT = "v revokes a token · p pauses or resumes its session · c pairing code · d pairs a device · g reloads"
STATE_STYLE = {"active": "green", "revoked": "red", "expired": "yellow"}


def revoke_question(token: tokens.Token) -> ConfirmScreen:
    """Revoke one token, after a yes: its next request is refused and its session ends."""
    return ConfirmScreen(
        "Revoke a token",
        f"{token.label} ({token.id}): its next request is refused (401) and its "
        f"session {token.session_id} ends. A host using it needs a new token.",
        "Revoke",
    )


def _service_url(db_path: Path) -> str | None:
    """The running service's ``/mcp`` address, or None."""
    # deferred: the MCP layer (and its SDK) loads only when the dashboard shows the service
    from server.mcp import service

    state = service.read_state(db_path)
    return state.url if state is not None else None


def _service_line(db_path: Path) -> Text:
    # deferred: the MCP layer (and its SDK) loads only when the dashboard shows the service line
    from server.mcp import service

    state = service.read_state(db_path)
    if state is None:
        return Text("kms service: not running (kms service start)", style="dim")
    return Text.assemble(("kms service ", "bold"), (state.url, "cyan"), f"  pid {state.pid}  v{state.version}")


class ServiceScreen(Screen[None]):
    """The service's state and every token, newest first."""

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("v", "revoke", "Revoke"),
        Binding("p", "pause", "Pause/resume"),
        Binding("g", "reload", "Reload"),
        Binding("c", "pair", "Pairing code"),
        Binding("d", "pair_device", "Pair a device"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[tokens.Token] = []
        self.loaded = False

    @property
    def kms(self) -> KmsDashboard:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(Text("kms service", style="bold"), id="service-title")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="tokens")
        yield Static("", id="token-scopes")  # the highlighted token's scopes whole (its cell may be cut)
        yield Static(Text(HINT, style="dim"), id="service-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, width in (
            ("Label", 18),
            ("Kind", 7),
            ("Scopes", 22),
            ("Session", 14),
            ("Last used", 9),
            ("State", 8),
        ):
            table.add_column(label, width=width, key=label)
        table.focus()
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    @work(group="service", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        now = self.kms.clock()
        self.entries = await self.kms.db(lambda conn: tokens.list_tokens(conn, include_ended=True, now=now))
        self.query_one("#service-title", Static).update(_service_line(Path(self.kms.db_path)))
        table = self.query_one(DataTable)
        table.clear()
        for t in self.entries:
            state = t.state(now)
            table.add_row(
                Text(t.label, no_wrap=True, overflow="ellipsis"),
                t.kind,
                Text(t.scopes.text(), no_wrap=True, overflow="ellipsis"),
                t.session_id,
                humanize.ago(t.last_used_at, now, "never"),
                Text(state, style=STATE_STYLE.get(state, "")),
                key=t.id,
            )
        count = sum(t.state(now) == "active" for t in self.entries)
        self.query_one("#service-status", Static).update(Text(f"{count} active token(s) · {HINT}", style="dim"))
        self.loaded = True

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        token = next((t for t in self.entries if t.id == event.row_key.value), None)
        shown = Text.assemble((token.label, "bold"), f"  {token.scopes.text()}") if token is not None else ""
        self.query_one("#token-scopes", Static).update(shown)

    def selected(self) -> tokens.Token | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((t for t in self.entries if t.id == key), None)

    def action_revoke(self) -> None:
        token = self.selected()
        if token is not None and token.revoked_at is None:
            self.revoke(token)

    @work(group="service-revoke", exclusive=True, exit_on_error=False)
    async def revoke(self, token: tokens.Token) -> None:
        if not await self.app.push_screen_wait(revoke_question(token)):
            return
        await self.kms.db(tokens.revoke, token.id)
        self.notify(f"{token.label} is revoked; its session ends.", title="Revoked")
        self.reload()

    def action_pair(self) -> None:
        self.pair()

    @work(group="service-pair", exclusive=True, exit_on_error=False)
    async def pair(self) -> None:
        """A pairing code for remote mode's consent page (docs/remote.md), shown for its ten minutes' use."""
        code, _until = await self.kms.db(remote_pairing.new_code)
        minutes = int(remote_pairing.CODE_S // 60)
        self.query_one("#service-status", Static).update(
            Text.assemble(("pairing code ", "bold"), (code, "bold cyan"), f"  valid {minutes} min, once · {HINT}")
        )
        self.notify(f"pairing code {code} (valid {minutes} min, once)", title="Remote mode", timeout=30)

    def action_pair_device(self) -> None:
        self.pair_device()

    @work(group="service-pair-device", exclusive=True, exit_on_error=False)
    async def pair_device(self) -> None:
        """A phone's pairing link for the review pages and its QR code (``kms review pair``'s, from the same core)."""
        # deferred: the review pages' package (Starlette, Jinja2) loads only when the person pairs a device
        from server.web import pairing

        base = pairing.pages_base(load_settings(self.kms.settings_path), _service_url(Path(self.kms.db_path)))
        if base is None:
            self.notify("the kms service is not running: start it with `kms service start`", severity="warning")
            return
        link = await self.kms.db(pairing.pair_link, base, "phone")
        minutes = int(review_access.PAIR_LINK_S // 60)
        self.app.push_screen(PairScreen(link, pairing.qr_text(link), minutes))

    def action_pause(self) -> None:
        token = self.selected()
        if token is not None:
            self.toggle_pause(token)

    @work(group="service-pause", exclusive=True, exit_on_error=False)
    async def toggle_pause(self, token: tokens.Token) -> None:
        try:
            state, _reason = await self.kms.db(control.state_of, token.session_id)
            new = "active" if state == "paused" else "paused"
            await self.kms.db(control.set_state, token.session_id, new, reason="from the dashboard")
        except KmsError as e:  # a session that never connected has no row yet
            self.notify(e.message, title=f"Can't change {token.session_id}", severity="error", timeout=8)
            return
        self.notify(f"session {token.session_id} is {new}", title="Session")
