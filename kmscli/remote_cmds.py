"""``kms remote enable|disable|off|status|pair|doctor``: remote mode (docs/remote.md), as thin adapters.

The settings are ``remote.*`` (``server.config.remote``); the running service follows them within a fraction
of a second (``server.mcp.remote.listener``): ``off`` and ``disable`` close the remote listener at once,
``enable`` opens it. Grants are ``server.activity.remote_grants``, pairing codes
``server.activity.remote_pairing``, the checks ``server.mcp.remote.doctor``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from kmscli.output import JsonOpt, cli_errors, console, open_db, print_json
from server.activity import remote_grants, remote_pairing
from server.config.remote import RemoteSettings
from server.config.schema import SettingsError
from server.config.settings import load_settings, set_value
from server.errors import KmsError
from server.humanize import ago
from server.mcp.remote.doctor import diagnose, state_for
from server.mcp.service_state import read_state
from server.store.db import default_db_path

remote_app = typer.Typer(
    help="Remote mode: claude.ai, Claude on the phone and ChatGPT reach kms through OAuth (docs/remote.md).",
    no_args_is_help=True,
)
OFF_WAIT_S = 5.0


def _settings() -> RemoteSettings:
    return RemoteSettings.from_settings(load_settings())


def _running_state() -> Any:
    return read_state(default_db_path())


@remote_app.command("enable")
def enable_cmd(
    url: Annotated[str, typer.Option("--url", help="Your public https address, e.g. https://box.tail1234.ts.net.")],
    port: Annotated[int | None, typer.Option("--port", help="The loopback port your tunnel forwards to.")] = None,
) -> None:
    """Turn remote mode on at URL: the service opens its remote listener (only the port your tunnel forwards to)."""
    with cli_errors():
        try:
            set_value("remote.url", url.rstrip("/"))
            if port is not None:
                set_value("remote.port", str(port))
        except SettingsError as e:
            raise KmsError("invalid-input", str(e)) from None
        set_value("remote.enabled", "true")
        s = _settings()
        console.print(
            f"remote mode on for {s.issuer} (listener on 127.0.0.1:{s.port}; writes are staged for your review).\n"
            f"Next: forward {s.issuer} to 127.0.0.1:{s.port} (docs/remote.md), `kms service start`, "
            f"then `kms remote doctor`. To connect a client: add {s.resource} as a custom connector and "
            "run `kms remote pair` when its consent page asks for a code.",
            highlight=False,
            markup=False,
        )


def _wait_closed() -> bool:
    deadline = time.monotonic() + OFF_WAIT_S
    while time.monotonic() < deadline:
        state = _running_state()
        if state is None or getattr(state, "remote_port", None) is None:
            return True
        time.sleep(0.05)
    return False


@remote_app.command("disable")
def disable_cmd() -> None:
    """Turn remote mode off (grants stay, for when it is on again; `kms remote off --revoke` ends them too)."""
    with cli_errors():
        set_value("remote.enabled", "false")
        closed = _wait_closed()
        console.print("remote mode off" + ("" if closed else " (the service has not closed its listener yet)"))


@remote_app.command("off")
def off_cmd(
    revoke: Annotated[bool, typer.Option("--revoke", help="Also end every remote grant.")] = False,
) -> None:
    """The panic switch: remote mode off, the running service's remote listener closed at once."""
    with cli_errors():
        set_value("remote.enabled", "false")
        ended = 0
        if revoke:
            conn = open_db(create=True)
            for grant in remote_grants.list_grants(conn):
                remote_grants.revoke_grant(conn, grant["id"])
                ended += 1
        closed = _wait_closed()
        if not closed:
            raise KmsError(
                "conflict",
                f"remote mode is off, but the service has not closed its listener within {OFF_WAIT_S:g} s: "
                "`kms service stop` stops it all",
            )
        console.print(
            "remote mode off: the remote listener is closed"
            + (f"; {ended} grant(s) revoked" if revoke else "; grants kept (`kms remote off --revoke` ends them)")
        )


@remote_app.command("status")
def status_cmd(json_out: JsonOpt = False) -> None:
    """Remote mode's settings, whether the running service listens for it, and the live grants."""
    with cli_errors():
        s = _settings()
        state = _running_state()
        grants = remote_grants.list_grants(open_db(create=True))
        info = {
            "enabled": s.enabled,
            "url": s.url,
            "port": s.port,
            "maxScopes": s.max_scopes.text(),
            "serviceRunning": state is not None,
            "listening": getattr(state, "remote_port", None) is not None,
            "error": getattr(state, "remote_error", None),
            "grants": grants,
        }
        if json_out:
            print_json(info)
            return
        now = time.time()
        if not s.enabled:
            console.print("remote mode is off (`kms remote enable --url https://…`)")
        else:
            where = (
                "listening" if info["listening"] else "not listening" + (f": {info['error']}" if info["error"] else "")
            )
            console.print(
                f"remote mode on for {s.url} (127.0.0.1:{s.port}, {where}; at most {info['maxScopes']})",
                highlight=False,
                markup=False,
            )
        for g in grants:
            used = ago(g["lastUsedAt"], now, "never") if g["lastUsedAt"] else "never used"
            console.print(f"{g['id']}  {g['client']}  {g['scopes']}  {used}", highlight=False, markup=False)


@remote_app.command("pair")
def pair_cmd() -> None:
    """A single-use pairing code (10 minutes) to type on the consent page: proof you hold this machine."""
    with cli_errors():
        code, until = remote_pairing.new_code(open_db(create=True))
        console.print(f"pairing code: {code}  (valid {round((until - time.time()) / 60)} min, once)", highlight=False)


@remote_app.command("doctor")
def doctor_cmd(json_out: JsonOpt = False) -> None:
    """Check remote mode from inside: listener, metadata, the public address, the clock; name what to run."""
    with cli_errors():
        findings = diagnose(_settings(), state_for(default_db_path()))
        if json_out:
            print_json([f.to_json() for f in findings])
        else:
            for f in findings:
                mark = "ok " if f.ok else "!! "
                console.print(
                    f"{mark}{f.check}: {f.message}" + (f"  -> {f.fix}" if f.fix else ""), markup=False, highlight=False
                )
        if not all(f.ok for f in findings):
            raise typer.Exit(1)
