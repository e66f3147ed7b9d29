"""The review pages: approve, reject and undo agents' work in a browser, on this machine or a paired phone.

An adapter layer beside ``server.mcp`` (it may import ``server.writes`` and below, never the MCP SDK): Starlette
routes, Jinja2 templates (autoescaped: a note is untrusted input) and htmx served from this package
(``static/``, no CDN). Every action calls the core function the CLI and the dashboard call. ``review_routes``
is the entry; docs/review.md tells how a person gets in and what each page does.
"""

from server.web.routes import PREFIX, review_mount, review_routes

__all__ = ["PREFIX", "review_mount", "review_routes"]
