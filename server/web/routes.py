"""``review_routes``: the review pages as Starlette routes, for the local service and the public origin.

Routes are relative: the service mounts them under ``/review`` (``review_mount``); every link a page makes
starts from the mount point (``root_path``), so the same routes serve under any prefix.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from server.activity import review_access
from server.web import actions, pages
from server.web.login import login
from server.web.site import Site, action, page, secured

PREFIX = review_access.PAGES_PATH
STATIC = {
    "htmx.min.js": "text/javascript; charset=utf-8",
    "review.js": "text/javascript; charset=utf-8",
    "review.css": "text/css; charset=utf-8",
}


@cache
def _static(name: str) -> bytes:
    return files("server.web").joinpath("static", name).read_bytes()


async def static(request: Request) -> Response:
    """The pages' own files, from the package (no CDN): htmx (vendored, docs/review.md), the script, the style."""
    name = request.path_params["name"]
    if name not in STATIC:
        return secured(Response(status_code=404))
    response = Response(_static(name), media_type=STATIC[name])
    response.headers["cache-control"] = "public, max-age=3600"
    return secured(response)


def review_routes(*, public: bool, db_path: Path | None = None) -> list[Route | Mount]:
    """The pages (``public``: the public origin's, for paired devices only). ``db_path``: the service's
    database (None: the default one)."""
    site = Site.make(db_path, public)

    async def login_route(request: Request) -> Response:
        return await login(site, request)

    return [
        Route("/", page(site, pages.queue_page), methods=["GET"]),
        Route("/queue/poll", page(site, pages.queue_poll), methods=["GET"]),
        Route("/pending/{pending_id:int}", page(site, pages.item_page), methods=["GET"]),
        Route("/pending/{pending_id:int}/approve", action(site, actions.approve), methods=["POST"]),
        Route("/pending/{pending_id:int}/reject", action(site, actions.reject), methods=["POST"]),
        Route("/sessions", page(site, pages.sessions_page), methods=["GET"]),
        Route("/sessions/{session_id}", page(site, pages.session_page), methods=["GET"]),
        Route("/sessions/{session_id}/pending/{verb:str}", action(site, actions.decide_session), methods=["POST"]),
        Route("/sessions/{session_id}/control/{verb:str}", action(site, actions.set_control), methods=["POST"]),
        Route("/sessions/{session_id}/undo", action(site, actions.undo), methods=["POST"]),
        Route("/changes/{invocation_id:int}/undo", action(site, actions.revert_change), methods=["POST"]),
        Route("/landed/{invocation_id:int}/keep", action(site, actions.keep_landed), methods=["POST"]),
        Route("/history", page(site, pages.history_page), methods=["GET"]),
        Route("/history/restore", action(site, actions.restore), methods=["POST"]),
        Route("/outside", page(site, pages.outside_page), methods=["GET"]),
        Route("/tokens", page(site, pages.tokens_page), methods=["GET"]),
        Route("/tokens/{token_id}/revoke", action(site, actions.revoke_token), methods=["POST"]),
        Route("/devices/{device_id}/revoke", action(site, actions.revoke_device), methods=["POST"]),
        Route("/logout", action(site, actions.logout), methods=["POST"]),
        Route("/login", login_route, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
    ]


def review_mount(*, public: bool, db_path: Path | None = None) -> Mount:
    """The pages mounted where the service serves them (``/review``)."""
    return Mount(PREFIX, routes=review_routes(public=public, db_path=db_path))
