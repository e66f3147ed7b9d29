"""``kms review`` (open the review pages with a one-time link), ``kms review pair|devices|revoke``.

Thin adapters: links, sessions and devices are ``server.activity.review_access``; the pages are ``server.web``,
served by the running service (``kms serve`` / ``kms service start``) under ``/review``.
"""

from __future__ import annotations

import os
import sys
import time
import webbrowser
from typing import Annotated

import typer

from kmscli.output import JsonOpt, cli_errors, console, open_db, print_json
from server.activity import review_access
from server.config.settings import load_settings
from server.errors import KmsError
from server.humanize import ago
from server.mcp.service_state import read_state
from server.store.db import default_db_path
from server.web import pairing

review_app = typer.Typer(
    help="The review pages in a browser: approve, reject and undo agents' work (docs/review.md).",
    invoke_without_command=True,
)

PrintOpt = Annotated[bool, typer.Option("--print", help="Print the link instead of opening the browser.")]


def _pages_url() -> str:
    """Where the running service serves the pages (``kms serve`` must run: the pages live in it)."""
    state = read_state(default_db_path())
    if state is None:
        raise KmsError("not-found", "the kms service is not running: start it with `kms service start`")
    return state.pages_url


def _graphical() -> bool:
    """A browser can open a window here: macOS, Windows, a desktop session, or one the person named (``BROWSER``).
    Over ssh Python's ``webbrowser`` would start a text browser in this very terminal: the link is printed."""
    env = os.environ
    return sys.platform in ("darwin", "win32") or any(env.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"))


@review_app.callback()
def review_cmd(ctx: typer.Context, print_only: PrintOpt = False) -> None:
    """Open the review pages in your browser with a one-time link (single use, valid for two minutes)."""
    if ctx.invoked_subcommand is not None:
        return
    with cli_errors():
        url = _pages_url()
        link = f"{url}/login?t={review_access.create_link(open_db(), 'login')}"
    if print_only or not _graphical() or not webbrowser.open(link):
        console.print(link, markup=False, highlight=False, soft_wrap=True)
        if not print_only:
            console.print("(no browser to open here: open this link, once, within two minutes)", style="dim")


@review_app.command("pair")
def pair_cmd(
    name: Annotated[str, typer.Option("--name", help="What to call the device (listed with the tokens).")] = "phone",
    origin: Annotated[
        str | None,
        typer.Option(
            "--origin",
            help="The origin the device opens (default: remote mode's public one when on, else this service).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Pair a phone or another device: a QR code and a link, single use for ten minutes, that give the device a
    named cookie for 30 days (listed by `kms review devices`, revocable). The link opens remote mode's public
    origin when remote mode is on (a phone is never on this machine's loopback), else this service's."""
    with cli_errors():
        state = read_state(default_db_path())
        base = pairing.pages_base(load_settings(), state.url if state is not None else None, origin)
        if base is None:
            raise KmsError("not-found", "the kms service is not running: start it with `kms service start`")
        link = pairing.pair_link(open_db(), base, name)
    if json_out:
        print_json({"link": link, "name": review_access.clean_name(name), "expiresIn": review_access.PAIR_LINK_S})
        return
    console.print(pairing.qr_text(link), markup=False, highlight=False, end="")
    console.print(link, markup=False, highlight=False, soft_wrap=True)
    console.print("Scan it or open it on the device, once, within ten minutes.", style="dim")


@review_app.command("devices")
def devices_cmd(
    all_devices: Annotated[bool, typer.Option("--all", help="Revoked and expired too.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Paired devices: name, when paired, last use."""
    now = time.time()
    with cli_errors():
        found = review_access.devices(open_db(), include_ended=all_devices, now=now)
    if json_out:
        print_json([d.to_json(now) for d in found])
        return
    if not found:
        console.print("No paired device (`kms review pair`).")
        return
    for d in found:
        used = ago(d.last_used_at, now, "never") if d.last_used_at else "never"
        console.print(
            f"{d.id}  {d.name or '(unnamed)'}  paired {ago(d.created_at, now, '?')}, last used {used}, {d.state(now)}",
            markup=False,
            highlight=False,
        )


@review_app.command("revoke")
def revoke_cmd(
    device_id: Annotated[str, typer.Argument(help="The device (`kms review devices`) or browser session id.")],
    json_out: JsonOpt = False,
) -> None:
    """Revoke a paired device (or a browser session): its next request is refused."""
    with cli_errors():
        done = review_access.revoke(open_db(), device_id)
    if json_out:
        print_json(done.to_json(time.time()))
        return
    console.print(f"revoked {done.id} ({done.name or done.kind})", markup=False, highlight=False)
