"""What every review page shares: the database, the templates, the door (``server.web.security``) and the answer.

A handler is a plain function of (site, request, visitor[, form]) run on a worker thread with that thread's
own connection (the event loop never waits on SQLite); ``page`` wraps a GET, ``action`` a POST (Origin and CSRF
checked first, then the form). A core refusal (``KmsError``) is a page saying so, with the status its kind
means, never a traceback; a POST that worked redirects (303), so the pages work with JavaScript off and a
reload never repeats a decision.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import apsw
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from server.activity import review_access
from server.errors import KmsError
from server.humanize import ago
from server.store.db import thread_connection
from server.web.security import COOKIE, HEADERS, Visitor, has_bearer, same_origin

STATUS = {"not-found": 404, "conflict": 409, "invalid-input": 400}
# what a redirect after an action says (fixed texts: a link cannot make the page say anything else)
DONE = {
    "approved": "Approved #{n}.",
    "rejected": "Rejected #{n}.",
    "approved-all": "Approved {n} waiting change(s).",
    "rejected-all": "Rejected {n} waiting change(s).",
    "paused": "Session paused: its writes answer `paused` until you resume it.",
    "resumed": "Session resumed.",
    "undone": "Undone: {n} change(s) reverted or restored.",
    "reverted": "Change #{n} undone.",
    "kept": "Change #{n} kept: no longer listed.",
    "restored": "Version {n} restored.",
    "revoked": "Revoked.",
}

Endpoint = Callable[[Request], Awaitable[Response]]


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("server.web", "templates"),
        autoescape=True,  # every note text, title, argument and diff is escaped: a note is untrusted input
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ago"] = lambda at, now: ago(at, now, "?") if at else "?"
    env.filters["clock"] = lambda at: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "?"
    return env


@dataclass
class Site:
    """The pages of one listener: the local service's (``public=False``) or the public origin's (paired
    devices only)."""

    db_path: Path | None
    public: bool
    env: Environment

    @classmethod
    def make(cls, db_path: Path | None, public: bool) -> Site:
        return cls(db_path, public, _env())

    def conn(self) -> apsw.Connection:
        return thread_connection(self.db_path)

    def visitor(self, request: Request) -> Visitor | None:
        secret = request.cookies.get(COOKIE)
        found = review_access.session_for(self.conn(), secret, devices_only=self.public)
        return None if found is None or secret is None else Visitor(found, review_access.csrf_token(secret))

    def render(
        self, request: Request, name: str, visitor: Visitor | None, *, status: int = 200, **context: Any
    ) -> Response:
        base = request.scope.get("root_path") or ""
        done = request.query_params.get("done", "")
        n = request.query_params.get("n", "")
        said = DONE[done].format(n=n if n.isdigit() else "?") if done in DONE else None
        html = self.env.get_template(name).render(
            base=base, visitor=visitor, public=self.public, now=time.time(), said=said, **context
        )
        return secured(HTMLResponse(html, status_code=status))

    def refusal(self, request: Request, status: int, title: str, message: str) -> Response:
        return self.render(request, "message.html", None, status=status, title=title, message=message)

    def failed(self, request: Request, visitor: Visitor | None, e: KmsError) -> Response:
        return self.render(
            request,
            "message.html",
            visitor,
            status=STATUS.get(e.kind, 400),
            title="Nothing was changed" if e.kind != "not-found" else "Not found",
            message=e.message,
        )


def secured(response: Response) -> Response:
    for k, v in HEADERS.items():
        response.headers.setdefault(k, v)
    return response


def redirect(request: Request, to: str, done: str | None = None, n: int | str | None = None) -> Response:
    """303 to ``to`` (a path under the pages; anything else goes to the queue) saying what was done."""
    base = request.scope.get("root_path") or ""
    if not to.startswith(base + "/") or to.startswith("//") or "\\" in to:
        to = base + "/"
    if done:
        to += ("&" if "?" in to else "?") + urlencode({"done": done, **({"n": n} if n is not None else {})})
    return secured(RedirectResponse(to, status_code=303))


def unauthorized(site: Site, request: Request) -> Response:
    """A page asked for without a cookie (a staged call's answer names a page's address, so its first visit may
    well be signed out): a page saying how to get in (``kms review``, or ``kms review pair`` on the public
    origin) and to come back to this address; 401, nothing about the page asked for shown."""
    return site.render(request, "sign_in.html", None, status=401, asked=request.url.path)


Page = Callable[[Site, Request, Visitor], Response]
Action = Callable[[Site, Request, Visitor, FormData], Response]


def page(site: Site, fn: Page) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        if has_bearer(request):
            return site.refusal(request, 401, "No bearer tokens here", "The review pages take no bearer token.")

        def work() -> Response:
            visitor = site.visitor(request)
            if visitor is None:
                return unauthorized(site, request)
            try:
                return fn(site, request, visitor)
            except KmsError as e:
                return site.failed(request, visitor, e)

        return await anyio.to_thread.run_sync(work)

    return endpoint


def action(site: Site, fn: Action) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        if has_bearer(request):
            return site.refusal(request, 401, "No bearer tokens here", "The review pages take no bearer token.")
        if not same_origin(request):
            return site.refusal(request, 403, "Refused", "This form was not sent from this page (its Origin).")
        form = await request.form(max_files=0, max_fields=200)

        def work() -> Response:
            visitor = site.visitor(request)
            if visitor is None:
                return unauthorized(site, request)
            secret = request.cookies.get(COOKIE) or ""
            if not review_access.csrf_ok(secret, str(form.get("csrf") or "")):
                return site.refusal(request, 403, "Refused", "This form is stale or forged (its CSRF token); reload.")
            try:
                return fn(site, request, visitor, form)
            except KmsError as e:
                return site.failed(request, visitor, e)

        return await anyio.to_thread.run_sync(work)

    return endpoint
