"""Pairing a phone (or another device) with the review pages: the one-time link and its QR code.

``kms review pair`` and the dashboard's service screen (``r``) show the same: a link, single use for ten minutes
(``server.activity.review_access``), and its QR code drawn in text. The link opens where a device can reach the
pages: remote mode's public origin when remote mode is on (a phone is never on this machine's loopback), else
the running service's own address (a browser on this machine, or a device through a forward the person made).
"""

from __future__ import annotations

import io

import apsw
import segno

from server.activity import review_access
from server.config.remote import RemoteSettings
from server.config.settings import Settings


def pages_base(settings: Settings, service_url: str | None, origin: str | None = None) -> str | None:
    """The pages' address a device opens: ``origin`` when given, else remote mode's public origin when it is on,
    else the running service's (``service_url``: its ``/mcp`` address); None when there is none."""
    if origin:
        return review_access.pages_url(origin)
    remote = RemoteSettings.from_settings(settings)
    if remote.active:
        return review_access.pages_url(remote.issuer)
    return review_access.pages_url(service_url.removesuffix("/mcp")) if service_url else None


def pair_link(conn: apsw.Connection, base: str, name: str) -> str:
    """A fresh pairing link under ``base`` for a device called ``name``."""
    return f"{base}/login?t={review_access.create_link(conn, 'pair', name=name)}"


def qr_text(link: str) -> str:
    """The link's QR code in text (half blocks: two modules a character row), for a terminal or the dashboard."""
    out = io.StringIO()
    segno.make(link, error="m").terminal(out=out, compact=True)
    return out.getvalue()
