"""Getting in: a one-time link (``kms review``, ``kms review pair``) exchanged, once, for the pages' cookie.

The answer to a good link sets the cookie and moves on to the queue with a ``<meta http-equiv="refresh">``
(no script): that next request starts on this origin, so a SameSite=Strict cookie goes with it even when the
link itself was opened from somewhere else (a terminal, a QR code scanner). On the public origin only a
pairing link is taken: a ``kms review`` link is for this machine's browser.
"""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.responses import Response

from server.activity import review_access
from server.web.security import cookie_header
from server.web.site import Site, secured


async def login(site: Site, request: Request) -> Response:
    link = request.query_params.get("t", "")
    purposes = ("pair",) if site.public else review_access.PURPOSES

    def work() -> Response:
        got = review_access.redeem(site.conn(), link, purposes=purposes)
        if got is None:
            again = "`kms review pair`" if site.public else "`kms review`"
            return site.refusal(
                request,
                401,
                "This link is used or expired",
                f"A link opens the pages once, soon after it is made: run {again} for a new one.",
            )
        secret, session = got
        response = site.render(request, "login.html", None, session=session)
        response.headers.append(
            "set-cookie", cookie_header(request, secret, session.expires_at - session.created_at, public=site.public)
        )
        return secured(response)

    return await anyio.to_thread.run_sync(work)
