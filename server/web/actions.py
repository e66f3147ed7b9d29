"""The review pages that act (POST): decide, pause and resume, undo, restore, revoke.

Each is a thin adapter over the core function the CLI and the dashboard call, so a change decided here is
decided everywhere, once: ``decide`` (the first decision wins; a later one, from any channel, is
``conflict`` and the page says who decided), ``server.activity.control.set_state``,
``server.writes.undo.undo_session.undo``, ``server.writes.undo.revert.revert``, ``server.writes.undo.restore.restore``,
``server.activity.tokens.revoke``, ``server.activity.review_access.revoke``. Each answers with a redirect (303)
back to the page it came from, saying what was done.
"""

from __future__ import annotations

import json

import apsw
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from server.activity import approvals, control, landed, remote_grants, review_access, tokens
from server.errors import KmsError
from server.web.security import Visitor
from server.web.site import Site, redirect
from server.writes import review
from server.writes.undo import restore as note_restore
from server.writes.undo import undo_session
from server.writes.undo.revert import revert

CHANNEL = "web"


def decide(conn: apsw.Connection, pending_id: int, approve: bool, reason: str = "", *, decider: str = "person") -> int:
    """The one decision of a waiting call from these pages (the channel ``web``; ``decider``: a paired device's
    name, else the person); the call's id. A later decision, from any channel, is ``conflict``. A detached call
    (a remote grant's) is applied right then, with the write tools the service process has loaded
    (``server.writes.appliers``)."""
    done = review.decide_pending(conn, pending_id, approve, channel=CHANNEL, reason=reason, decider=decider)
    return int(done["id"])


def _decider(visitor: Visitor) -> str:
    """Who decided, as the decision records it: a paired device by its name, a browser on this machine: the person."""
    s = visitor.session
    return s.name if s.kind == "device" and s.name else "person"


def _next(form: FormData) -> str:
    return str(form.get("next") or "")


def _text(form: FormData, name: str) -> str:
    return str(form.get(name) or "").strip()


def approve(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    done = decide(site.conn(), int(request.path_params["pending_id"]), True, decider=_decider(visitor))
    return redirect(request, _next(form), "approved", done)


def reject(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    done = decide(
        site.conn(), int(request.path_params["pending_id"]), False, _text(form, "reason"), decider=_decider(visitor)
    )
    return redirect(request, _next(form), "rejected", done)


def decide_session(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    """Approve or reject every call of one session the page listed (``ids``: a call staged after the page was
    drawn is not decided unseen); one already decided elsewhere is passed over."""
    verb = request.path_params["verb"]
    if verb not in ("approve-all", "reject-all"):
        raise KmsError("not-found", f"no action {verb!r}")
    approve_all = verb == "approve-all"
    conn = site.conn()
    ids = [int(str(x)) for x in form.getlist("ids") if str(x).isdigit()]
    sid = request.path_params["session_id"]
    n = 0
    for pid in ids:
        item = approvals.get(conn, pid)
        if item is None or item.session_id != sid:
            continue
        try:
            decide(conn, pid, approve_all, _text(form, "reason"), decider=_decider(visitor))
            n += 1
        except KmsError as e:
            if e.kind != "conflict":
                raise
    return redirect(request, _next(form), "approved-all" if approve_all else "rejected-all", n)


def set_control(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    verb = request.path_params["verb"]
    if verb not in ("pause", "resume"):
        raise KmsError("not-found", f"no action {verb!r}")
    state = "paused" if verb == "pause" else "active"
    control.set_state(
        site.conn(), request.path_params["session_id"], state, reason=_text(form, "reason") or None, channel=CHANNEL
    )
    return redirect(request, _next(form), "paused" if state == "paused" else "resumed")


def undo(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    """Undo a whole session as its page previewed it: the outside notes it listed (``shown``) are restored only
    while they hold what the page saw."""
    try:
        shown = {"outside": json.loads(_text(form, "shown") or "[]")}
    except ValueError:
        raise KmsError("invalid-input", "the undo form was damaged; reload the page") from None
    done = undo_session.undo(site.conn(), request.path_params["session_id"], shown=shown)
    if not done["reverted"] and not done["restored"] and (done["skipped"] or done["notRestored"]):
        first = (done["notRestored"] or done["skipped"])[0]
        raise KmsError("conflict", f"nothing could be undone: {first['reason']}")
    return redirect(request, _next(form), "undone", len(done["reverted"]) + len(done["restored"]))


def revert_change(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    """Undo one unit: a call and every file it changed, only while each is what the call left (else
    ``conflict``, nothing written)."""
    inv = int(request.path_params["invocation_id"])
    revert(site.conn(), inv)
    return redirect(request, _next(form), "reverted", inv)


def restore(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    """Write a version back, only while the file is what the history page showed (``expect``)."""
    number = _text(form, "version")
    if not number.isdigit():
        raise KmsError("invalid-input", "which version? (a number from the history page)")
    conn = site.conn()
    ref, vault = _text(form, "note"), _text(form, "vault") or None
    plan = note_restore.preview_restore(conn, ref, number=int(number), vault=vault)
    expect = _text(form, "expect")
    note_restore.restore(
        conn, ref, number=int(number), expect=expect if "expect" in form else plan["expect"], vault=vault
    )
    return redirect(request, _next(form), "restored", int(number))


def revoke_token(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    """A token, a host token, or a remote grant (kind ``remote``: the grant ends with every access and refresh
    token it minted, as ``kms token revoke`` ends it)."""
    conn, token_id = site.conn(), request.path_params["token_id"]
    if tokens.get(conn, token_id).kind == "remote":  # (an unknown id: ``not-found``, as any revoke)
        remote_grants.revoke_grant(conn, token_id)
    else:
        tokens.revoke(conn, token_id)
    return redirect(request, _next(form), "revoked")


def keep_landed(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    """A write landed under ``review.mode = after``: looked at and kept (``kms pending --keep``)."""
    invocation_id = int(request.path_params["invocation_id"])
    landed.keep(site.conn(), [invocation_id])
    return redirect(request, _next(form), "kept", invocation_id)


def revoke_device(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    review_access.revoke(site.conn(), request.path_params["device_id"])
    return redirect(request, _next(form), "revoked")


def logout(site: Site, request: Request, visitor: Visitor, form: FormData) -> Response:
    review_access.revoke(site.conn(), visitor.session.id)
    return redirect(request, _next(form))
