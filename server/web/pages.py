"""The review pages that show (GET): the queue and its live fragment, one item, sessions, a note's history,
edits made outside kms, tokens and devices. Each reads through the same core functions the dashboard and the CLI
read through; nothing here decides anything."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from server.activity import feed, landed, outside_feed, review_access, tokens
from server.activity import note_history as note_history
from server.errors import KmsError
from server.web import queue
from server.web.diffview import view
from server.web.security import Visitor
from server.web.site import Site, secured
from server.writes.undo import undo_session
from server.writes.undo.restore import preview_restore

CHANGES_SHOWN = 200
READS_SHOWN = 200
LANDED_SHOWN = 50  # landed writes listed for a look under review.mode = after (the CLI lists them all)


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def queue_page(site: Site, request: Request, visitor: Visitor) -> Response:
    conn = site.conn()
    q = queue.build(conn, before_id=_int(request.query_params.get("before")))
    # the writes that landed under ``review.mode = after``, for a look: undo (revert) or keep each
    return site.render(request, "queue.html", visitor, q=q, landed=landed.listed(conn, limit=LANDED_SHOWN))


def queue_poll(site: Site, request: Request, visitor: Visitor) -> Response:
    """The queue's live part: 204 (htmx swaps nothing) while the open queue is what the page shows, else the
    list again. A page left open costs one indexed read per poll."""
    conn = site.conn()
    if request.query_params.get("key") == queue.signature(conn) and not request.query_params.get("before"):
        return secured(Response(status_code=204))
    q = queue.build(conn)
    return site.render(request, "_queue.html", visitor, q=q)


def item_page(site: Site, request: Request, visitor: Visitor) -> Response:
    found = queue.one(site.conn(), int(request.path_params["pending_id"]))
    if found is None:
        raise KmsError("not-found", f"no pending change #{request.path_params['pending_id']}")
    return site.render(request, "item.html", visitor, it=found)


def sessions_page(site: Site, request: Request, visitor: Visitor) -> Response:
    now = time.time()
    return site.render(request, "sessions.html", visitor, sessions=feed.session_overview(site.conn(), now, limit=100))


def session_page(site: Site, request: Request, visitor: Visitor) -> Response:
    sid = request.path_params["session_id"]
    conn = site.conn()
    now = time.time()
    info = next((s for s in feed.session_overview(conn, now, limit=500) if s.id == sid), None)
    changes, more = feed.window(conn, feed.FeedFilter(session=sid), limit=CHANGES_SHOWN)
    reverted = feed.reverted_ids(conn)
    waiting = [g for g in queue.build(conn, limit=500).groups if g.who.session_id == sid]
    if info is None and not changes and not waiting:
        raise KmsError("not-found", f"no session {sid!r}")
    try:
        plan = undo_session.preview(conn, sid)
    except KmsError as e:  # a session known only by what it staged: nothing of it to undo yet
        if e.kind != "not-found":
            raise
        plan = {"revert": [], "skip": [], "outside": [], "outsideSkip": []}
    shown = [{"vault": n["vault"], "path": n["path"], "expect": n["expect"]} for n in plan["outside"]]
    return site.render(
        request,
        "session.html",
        visitor,
        sid=sid,
        info=info,
        reads=feed.session_reads(conn, sid, limit=READS_SHOWN),
        changes=changes,
        more=more,
        reverted=reverted,
        plan=plan,
        shown=shown,
        waiting=waiting,
    )


def history_page(site: Site, request: Request, visitor: Visitor) -> Response:
    """A note's versions, newest first, and the diff between two of them (``a`` → ``b``; ``b`` missing: the
    file as it is now), with a restore of ``a``."""
    conn = site.conn()
    ref = (request.query_params.get("note") or "").strip()
    vault = request.query_params.get("vault") or None
    if not ref:
        return site.render(request, "history.html", visitor, ref="", line=None, versions=[], diff=None)
    line = note_history.find_line(conn, ref, vault)
    versions = note_history.versions(conn, line, limit=200)
    a, b = _int(request.query_params.get("a")), _int(request.query_params.get("b"))
    diff = None
    if a is not None and b is not None:
        d = note_history.diff(conn, line, number=a, to_number=b)
        diff = {"from": a, "to": b, "view": view(d["diff"])}
    elif a is not None:  # the note now -> version a, as a restore would write it (``expect``: the file now)
        plan = preview_restore(conn, line.note_id, number=a, vault=line.vault)
        diff = {"from": a, "to": None, "view": view(plan["diff"]), "expect": plan["expect"], "same": plan["same"]}
    return site.render(request, "history.html", visitor, ref=ref, line=line, versions=versions, diff=diff)


def outside_page(site: Site, request: Request, visitor: Visitor) -> Response:
    """Edits made outside kms (host tools, the person's editor), merged with kms's own as the dashboard's feed
    shows them."""
    conn = site.conn()
    found = outside_feed.merged_page(conn, limit=200)
    return site.render(request, "outside.html", visitor, page=found, is_outside=outside_feed.is_outside)


def tokens_page(site: Site, request: Request, visitor: Visitor) -> Response:
    conn = site.conn()
    now = time.time()
    return site.render(
        request,
        "tokens.html",
        visitor,
        tokens=tokens.list_tokens(conn, now=now),
        devices=review_access.devices(conn, now=now),
        token_now=now,
    )
