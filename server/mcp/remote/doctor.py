"""``kms remote doctor``: what can be checked of remote mode from inside the machine, each finding naming the fix.

1. **settings**: remote mode on, with an https address (``kms remote enable --url``);
2. **listener**: the running service has the remote listener open on its port (the state file says so, and
   it answers on loopback when asked with the public Host);
3. **metadata**: the two discovery documents agree exactly: the protected resource's ``resource`` is
   ``<url>/mcp`` and its one authorization server is the issuer ``<url>``, the issuer's metadata says the same;
4. **public**: the public address, fetched through the person's TLS terminator (``PUBLIC_TIMEOUT_S``), answers
   with the very same metadata. Unreachable is a finding (the tunnel down, DNS, a firewall), never a crash; a
   421 means the terminator rewrote the Host header; another document means something else answers there;
5. **clock**: the machine's clock against the public answer's ``Date`` (an access token's hour, the consent
   page's ten minutes and the pairing code's depend on it);
6. **forwarding**: the forwarding headers the listener last saw (``X-Forwarded-For``, ``-Proto``, ...): whether
   requests come through a terminator at all, and a plain-http one named.
"""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from server.config.remote import RemoteSettings
from server.mcp.remote.screens import seen_path
from server.mcp.service_state import read_state

if TYPE_CHECKING:
    import httpx

PUBLIC_TIMEOUT_S = 4.0
LOCAL_TIMEOUT_S = 2.0
CLOCK_SKEW_S = 60.0
ASM = "/.well-known/oauth-authorization-server"
PRM = "/.well-known/oauth-protected-resource/mcp"


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    message: str
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "message": self.message, "fix": self.fix}


def _documents(http: httpx.Client, base: str, host: str) -> tuple[dict[str, Any], dict[str, Any]]:
    asm = http.get(base + ASM, headers={"host": host})
    prm = http.get(base + PRM, headers={"host": host})
    for reply in (asm, prm):
        reply.raise_for_status()
    return asm.json(), prm.json()


def _agree(settings: RemoteSettings, asm: dict[str, Any], prm: dict[str, Any]) -> str | None:
    """Why the documents disagree with the settings or each other (exact strings), or None."""
    if asm.get("issuer") != settings.issuer:
        return f"the issuer is {asm.get('issuer')!r}, not {settings.issuer!r}"
    if prm.get("resource") != settings.resource:
        return f"the resource is {prm.get('resource')!r}, not {settings.resource!r}"
    if prm.get("authorization_servers") != [settings.issuer]:
        return (
            f"the resource names authorization servers {prm.get('authorization_servers')!r}, not [{settings.issuer!r}]"
        )
    return None


def diagnose(settings: RemoteSettings, state: Any, *, now: float | None = None) -> list[Finding]:
    """The findings, in order; the later checks are skipped once an earlier one makes them moot."""
    out: list[Finding] = []
    if not settings.active:
        why = "remote mode is off" if settings.url else "no public address is set"
        return [Finding("settings", False, why, "kms remote enable --url https://<your public name>")]
    out.append(Finding("settings", True, f"remote mode is on for {settings.issuer}"))
    port = getattr(state, "remote_port", None) if state is not None else None
    if state is None:
        out.append(Finding("listener", False, "the kms service is not running", "kms service start"))
        return out
    if port is None:
        error = getattr(state, "remote_error", None)
        message = f"the remote listener could not open ({error})" if error else "the remote listener is not open"
        fix = "free that port or `kms config set remote.port N`" if error else "kms service restart"
        out.append(Finding("listener", False, message, fix))
        return out
    # deferred: httpx's package import loads its own command line (click, rich), kept out of the core
    import httpx

    host = urlsplit(settings.issuer).netloc
    local = f"http://127.0.0.1:{port}"
    with httpx.Client(timeout=LOCAL_TIMEOUT_S) as http:
        try:
            asm, prm = _documents(http, local, host)
        except (httpx.HTTPError, ValueError) as e:
            out.append(
                Finding("listener", False, f"127.0.0.1:{port} does not answer as kms: {e}", "kms service restart")
            )
            return out
    out.append(Finding("listener", True, f"listening on 127.0.0.1:{port} (point your tunnel there)"))
    problem = _agree(settings, asm, prm)
    out.append(
        Finding("metadata", False, problem, "kms service restart (the listener reads remote.url when it opens)")
        if problem
        else Finding("metadata", True, "issuer and resource agree exactly")
    )
    out += _public(settings, now)
    out.append(_forwarding(Path(state.db_path), time.time() if now is None else now))
    return out


def _forwarding(db_path: Path, now: float) -> Finding:
    """What the listener last saw of the terminator's forwarding headers (``ForwardingSeen``)."""
    try:
        seen = json.loads(seen_path(db_path).read_text())
    except (OSError, ValueError):
        return Finding("forwarding", True, "no request through a TLS terminator seen yet (no X-Forwarded-* header)")
    names = ", ".join(seen.get("headers", [])) or "none"
    if seen.get("proto") == "http":
        return Finding(
            "forwarding",
            False,
            f"the terminator forwarded a plain-http request (X-Forwarded-Proto: http, {names})",
            "serve the public address over https only (redirect http to https)",
        )
    return Finding("forwarding", True, f"forwarding headers seen {int(now - seen.get('at', now))} s ago: {names}")


def _public(settings: RemoteSettings, now: float | None) -> list[Finding]:
    # deferred: httpx's package import loads its own command line (click, rich), kept out of the core
    import httpx

    terminator = "docs/remote.md: Tailscale Funnel, Caddy or a Cloudflare tunnel to 127.0.0.1:" + str(settings.port)
    try:
        with httpx.Client(timeout=PUBLIC_TIMEOUT_S) as http:
            asm_reply = http.get(settings.issuer + ASM)
            prm_reply = http.get(settings.issuer + PRM)
    except httpx.HTTPError as e:
        return [
            Finding("public", False, f"{settings.issuer} is unreachable from here ({type(e).__name__})", terminator)
        ]
    if 421 in (asm_reply.status_code, prm_reply.status_code):
        return [
            Finding(
                "public",
                False,
                "the listener was reached under another Host name: the TLS terminator rewrites the Host header",
                "pass the original Host through (Caddy: the default; cloudflared: no httpHostHeader)",
            )
        ]
    try:
        asm_reply.raise_for_status()
        prm_reply.raise_for_status()
        problem = _agree(settings, asm_reply.json(), prm_reply.json())
    except (httpx.HTTPError, ValueError):
        problem = f"answered {asm_reply.status_code}/{prm_reply.status_code}, not kms's metadata"
    findings = [
        Finding(
            "public", False, f"{settings.issuer} {problem}", "point the terminator at 127.0.0.1:" + str(settings.port)
        )
        if problem
        else Finding("public", True, f"{settings.issuer} answers with the same metadata")
    ]
    findings.append(_clock(asm_reply.headers.get("date"), time.time() if now is None else now))
    return findings


def _clock(date: str | None, now: float) -> Finding:
    if not date:
        return Finding("clock", True, "no Date header to compare the clock with")
    try:
        theirs = email.utils.parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError):
        return Finding("clock", True, "the Date header could not be read")
    skew = now - theirs
    if abs(skew) > CLOCK_SKEW_S:
        return Finding("clock", False, f"this clock is {skew:+.0f} s off the terminator's", "turn on NTP time sync")
    return Finding("clock", True, f"the clock agrees within {abs(skew):.0f} s")


def state_for(db_path: Path) -> Any:
    """The running service's state (its remote listener's port, or why it could not open)."""
    return read_state(db_path)
