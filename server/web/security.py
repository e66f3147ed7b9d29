"""The review pages' door: who is let in, which POST is taken, and the headers every answer carries.

- **No bearer token**: a request with an ``Authorization`` header is refused (401) whatever else it carries: a
  token is an agent's, and an agent must never approve its own writes through these pages.
- **The cookie** (``COOKIE``): HttpOnly, SameSite=Strict, scoped to the pages' path, Secure on https; its value
  is a secret whose digest ``server.activity.review_access`` keeps. On the public origin only a paired device's
  cookie opens a page (``devices_only``).
- **Every POST**: an ``Origin`` header naming this very host (a browser always sends one on a POST; a missing
  one is refused too), and the form's ``csrf`` field equal to the session's token
  (``review_access.csrf_token``). Either failing is 403, nothing done.
- **Headers** (``HEADERS``): a CSP without inline scripts or styles (``script-src 'self'``: htmx and the pages'
  own script are files served from the package), ``frame-ancestors 'none'`` (and ``X-Frame-Options``), a
  referrer for this origin only (a login link in a URL never leaks to another site; ``no-referrer`` would make a
  browser send ``Origin: null`` on the pages' own form POSTs, which the Origin check refuses), ``no-store`` (a
  page of diffs is never cached on a shared machine), ``nosniff``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request

from server.activity import review_access

COOKIE = "kms_review"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}


@dataclass(frozen=True)
class Visitor:
    """The person behind a request: their review session and the CSRF token of their forms."""

    session: review_access.ReviewSession
    csrf: str


def has_bearer(request: Request) -> bool:
    return "authorization" in request.headers


def same_origin(request: Request) -> bool:
    """The request's ``Origin`` names the host it was sent to (http or https): a page of another site can
    neither forge it nor leave it out of a POST. The service's ``HttpGuard`` already holds a loopback bind to
    its exact origins; this is the pages' own check, for the public origin too."""
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return False
    parts = urlsplit(origin)
    host = request.headers.get("host", "")
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc.lower() == host.lower()


def cookie_path(request: Request) -> str:
    return (request.scope.get("root_path") or "") + "/"


def cookie_header(request: Request, secret: str, max_age: float, *, public: bool = False) -> str:
    """The ``Set-Cookie`` value of a new session (HttpOnly, SameSite=Strict; Secure on https, and always on the
    public origin: it is https to the browser even where a proxy forwards it to kms as plain http)."""
    secure = "; Secure" if public or request.url.scheme == "https" else ""
    return f"{COOKIE}={secret}; Path={cookie_path(request)}; Max-Age={int(max_age)}; HttpOnly; SameSite=Strict{secure}"
