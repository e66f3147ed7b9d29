"""The consent page (``/consent``): the person lets one client in, proving they hold the machine kms runs on.

``GET /consent?request=KEY`` (where ``/authorize`` sent the browser) shows the client's name and where its code
will go (the redirect's host), a choice of scopes in kms's grammar (a tier up to ``remote.max_scopes``'s, and
optional ``vault:``/``folder:`` words), and asks for the pairing code ``kms remote pair`` printed. ``POST``
checks the request (unknown or older than ten minutes: 400), its CSRF token, then either denies (back to the
client with ``error=access_denied``, ``state`` and ``iss``) or spends the pairing code
(``server.activity.remote_pairing``: five wrong ones lock pairing) and sends the browser back with ``code``,
``state`` and ``iss`` (RFC 9207). The scopes granted are the person's choice clamped to
``remote.max_scopes`` (``Scopes.within``).

The page is plain server-rendered HTML, every value escaped, no script at all; its headers forbid framing
(``frame-ancestors 'none'``), any other source (``default-src 'none'``; the one style block by its hash),
form posts anywhere but here and the client's redirect origin, and any referrer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp.server.auth.provider import construct_redirect_uri
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from server.activity import remote_grants, remote_pairing, tokens
from server.config.remote import RemoteSettings
from server.config.scopes import ScopeError, Scopes
from server.config.tiers import TIERS
from server.errors import KmsError
from server.store.db import thread_connection

STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:34rem;margin:2rem auto;padding:0 1rem;line-height:1.4}"
    "fieldset{margin:1rem 0}input[type=text]{width:100%;font-size:1.1rem}.err{color:#b00020}"
    "button{font-size:1rem;margin-right:1rem}"
)
STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()


def _headers(redirect_uri: str | None) -> dict[str, str]:
    target = urlsplit(redirect_uri or "")
    origin = f" {target.scheme}://{target.netloc}" if target.scheme and target.netloc else ""
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'sha256-{STYLE_HASH}'; form-action 'self'{origin}; "
            "frame-ancestors 'none'; base-uri 'none'"
        ),
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }


def _page(body: str, status: int = 200, redirect_uri: str | None = None) -> HTMLResponse:
    doc = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>kms: allow a remote client?</title><style>{STYLE}</style></head><body>{body}</body></html>"
    )
    return HTMLResponse(doc, status_code=status, headers=_headers(redirect_uri))


def _form(key: str, pending: remote_grants.PendingRequest, ceiling: Scopes, error: str = "") -> str:
    e = html.escape
    params = pending.params
    host = urlsplit(params["redirect_uri"]).netloc
    asked = _asked(params["scopes"], ceiling)
    tiers = TIERS[: TIERS.index(ceiling.tier) + 1]
    choices = "".join(
        f'<label><input type="radio" name="tier" value="{e(t)}"{" checked" if t == asked.tier else ""}> {e(t)}</label> '
        for t in tiers
    )
    extra = " ".join([f"vault:{v}" for v in asked.vaults] + [f"folder:{f}" for f in asked.folders])
    problem = f'<p class="err">{e(error)}</p>' if error else ""
    return (
        f"<h1>Allow {e(params['client_name'])} into your notes?</h1>{problem}"
        f"<p><b>{e(params['client_name'])}</b> asks to reach kms over the internet. Its code goes to "
        f"<b>{e(host)}</b>. Every note it writes waits for your review.</p>"
        '<form method="post" action="consent">'
        f'<input type="hidden" name="request" value="{e(key)}">'
        f'<input type="hidden" name="csrf" value="{e(pending.csrf)}">'
        f"<fieldset><legend>Highest tier (at most {e(ceiling.tier)})</legend>{choices}</fieldset>"
        "<p><label>Only these vaults or folders (optional, such as <code>vault:notes folder:inbox</code>):<br>"
        f'<input type="text" name="extra" value="{e(extra)}" autocomplete="off"></label></p>'
        "<p><label>Pairing code (run <code>kms remote pair</code> on your machine):<br>"
        '<input type="text" name="code" inputmode="numeric" autocomplete="one-time-code"></label></p>'
        '<button type="submit" name="decision" value="allow">Allow</button>'
        '<button type="submit" name="decision" value="deny">Deny</button></form>'
    )


def _asked(requested: str, ceiling: Scopes) -> Scopes:
    try:
        return Scopes.parse(requested or ceiling.text()).within(ceiling)
    except ScopeError:
        return ceiling


class Consent:
    """The ``/consent`` endpoint (see the module docstring)."""

    def __init__(self, db_path: Any, settings: RemoteSettings) -> None:
        self.db_path = db_path
        self.settings = settings

    def _conn(self) -> Any:
        return thread_connection(self.db_path)

    async def handle(self, request: Request) -> Response:
        if request.method == "GET":
            key = request.query_params.get("request", "")
            pending = remote_grants.get_request(self._conn(), key)
            if pending is None:
                return _gone()
            return _page(_form(key, pending, self.settings.max_scopes), redirect_uri=pending.params["redirect_uri"])
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        return await anyio.to_thread.run_sync(lambda: self.decide(fields))

    def decide(self, fields: dict[str, str]) -> Response:
        key = fields.get("request", "")
        conn = self._conn()
        pending = remote_grants.get_request(conn, key)
        if pending is None:
            return _gone()
        params = pending.params
        if not hmac.compare_digest(fields.get("csrf", "").encode(), pending.csrf.encode()):
            return _page("<h1>This form is not the one kms showed</h1><p>Start again from your client.</p>", 403)
        back = params["redirect_uri"]
        if fields.get("decision") != "allow":
            remote_grants.close_request(conn, key)
            return self._redirect(back, error="access_denied", state=params["state"])
        ceiling = self.settings.max_scopes
        try:
            chosen = Scopes.parse(f"tier:{fields.get('tier', 'read')} {fields.get('extra', '')}").within(ceiling)
            tokens.check_vaults(conn, chosen)
        except ScopeError as e:
            return _page(_form(key, pending, ceiling, str(e)), 400, back)
        except KmsError as e:
            return _page(_form(key, pending, ceiling, e.message), 400, back)
        try:
            remote_pairing.use_code(conn, fields.get("code", ""))
        except KmsError as e:
            return _page(_form(key, pending, ceiling, e.message), 429 if e.kind == "rate-limited" else 400, back)
        code = remote_grants.issue_code(
            conn,
            pending.client_id,
            {
                "scopes": chosen.text(),
                "client_name": params["client_name"],
                "redirect_uri": back,
                "explicit": params["explicit"],
                "code_challenge": params["code_challenge"],
                "resource": params["resource"],
            },
        )
        remote_grants.close_request(conn, key)
        return self._redirect(back, code=code, state=params["state"])

    def _redirect(self, back: str, **params: str | None) -> Response:
        target = construct_redirect_uri(back, **params, iss=self.settings.issuer)
        return RedirectResponse(target, status_code=303, headers={"Cache-Control": "no-store"})


def _gone() -> HTMLResponse:
    return _page(
        "<h1>This request is unknown or has expired</h1><p>Start the connection again from your client "
        "(consent pages last ten minutes).</p>",
        400,
    )
