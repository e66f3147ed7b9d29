"""Text for the dashboard: status symbols, gauges (pure functions, easy to test; times are
``server.humanize``, shared with the CLI).

Status is always shown as a symbol AND a word AND a colour, so nothing depends on
colour alone. The symbols are single-cell characters so columns stay aligned in
every terminal.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from server.activity.provenance import STATUS_MARKS
from server.activity.ratelimit import Gauge
from server.activity.tool_names import (
    KMS_CREATE_MANY,
    KMS_GET_BACKLINKS,
    KMS_INSERT_AT,
    KMS_INVENTORY,
    KMS_LIST_FOLDER,
    KMS_LIST_PROPERTIES,
    KMS_LIST_RECENT,
    KMS_LIST_TAGS,
    KMS_MOVE_FOLDER,
    KMS_REMEMBER,
    KMS_RENAME_FOLDER,
    KMS_SEMANTIC_SEARCH,
    KMS_UPDATE_PROPERTIES,
)
from server.humanize import duration

# status -> (symbol, word, style): the marks are the core's (``kms log`` shows the same), the colours ours
STYLE = {"success": "bold green", "conflict": "bold yellow", "rate-limited": "bold magenta"}
STATUS_STYLE: dict[str, tuple[str, str, str]] = {
    status: (symbol, word, STYLE.get(status, "bold red")) for status, (symbol, word) in STATUS_MARKS.items()
}
REVERTED_STYLE = ("↶", "reverted", "dim italic")
OVERWRITTEN_STYLE = ("↯", "overwritten", "bold yellow")  # a later save dropped what it wrote
STATE_STYLE: dict[str, tuple[str, str]] = {
    "live": ("●", "bold green"),
    "idle": ("◐", "yellow"),
    "gone": ("✗", "red"),
    "ended": ("○", "dim"),
}


def status_text(status: str, reverted: bool = False, overwritten: bool = False) -> Text:
    """``✓ ok`` in green, ``✗ error`` in red, ...; a reverted success shows ``↶ reverted``, one whose
    text a later save dropped ``↯ overwritten``."""
    if status == "success" and reverted:
        symbol, word, style = REVERTED_STYLE
    elif status == "success" and overwritten:
        symbol, word, style = OVERWRITTEN_STYLE
    else:
        symbol, word, style = STATUS_STYLE.get(status, ("?", status, "bold"))
    return Text(f"{symbol} {word}", style=style)


TOOL_CELLS = 7  # the feed's tool column: every name whole (a cut one read `restor`)
SHORT_TOOLS = {
    KMS_UPDATE_PROPERTIES: "props",
    KMS_INSERT_AT: "insert",
    KMS_CREATE_MANY: "many",
    KMS_REMEMBER: "memory",
    KMS_MOVE_FOLDER: "mv-dir",
    KMS_RENAME_FOLDER: "rn-dir",
    KMS_SEMANTIC_SEARCH: "meaning",
    KMS_LIST_PROPERTIES: "props?",
    KMS_LIST_RECENT: "recent",
    KMS_LIST_TAGS: "tags",
    KMS_LIST_FOLDER: "folder",
    KMS_GET_BACKLINKS: "links",
    KMS_INVENTORY: "invent",
    "session-note": "session",  # kms's own capture of a session note
}


def short_tool(tool: str) -> str:
    """``kms_append`` -> ``append``, ``kms_update_properties`` -> ``props``: whole in ``TOOL_CELLS`` cells."""
    return SHORT_TOOLS.get(tool, tool.removeprefix("kms_"))


def bar(count: int, limit: int | None, width: int = 5) -> str:
    """``███░░`` filled by count/limit (empty when unlimited)."""
    if not limit:
        return "·" * width
    filled = min(width, round(width * count / limit)) if count else 0
    if count and not filled:
        filled = 1
    return "█" * filled + "░" * (width - filled)


def _gauge_style(count: int, limit: int | None) -> str:
    if not limit:
        return "dim"
    if count >= limit:
        return "bold red"
    return "yellow" if count >= 0.7 * limit else "green"


def minute_gauge(g: Gauge) -> Text:
    """Writes in the current minute against the per-minute limit: ``███░░ 3/5``."""
    return Text(
        f"{bar(g.window_count, g.per_minute)} {g.minute_text}", style=_gauge_style(g.window_count, g.per_minute)
    )


def total_gauge(g: Gauge) -> Text:
    return Text(g.total_text, style=_gauge_style(g.total, g.per_session))


def next_write(g: Gauge, now: float) -> Text:
    """When a limited session may write again: ``now``, ``in 23s`` or ``never`` (session total)."""
    if g.exhausted:
        return Text("⊘ never", style="bold red")
    if g.next_write_at is not None and g.next_write_at > now:
        return Text(f"◷ in {duration(g.next_write_at - now + 0.999)}", style="bold magenta")
    return Text("✓ now", style="green")


def outside_status(size_change: int) -> Text:
    """An edit a session made outside kms: ``↗`` and the size change (``+120B``, ``-3kB``)."""
    n = abs(size_change)
    sign = "-" if size_change < 0 else "+"
    size = f"{n}B" if n < 1000 else f"{n // 1000}kB" if n < 1_000_000 else f"{n // 1_000_000}MB"
    return Text(f"↗ {sign}{size}", style="bold magenta")


def note_label(row: dict[str, Any]) -> str:
    return row.get("title") or row.get("path") or row.get("note_id") or "-"


def flag(name: str, on: bool, tight: bool = False) -> Text:
    """A settings switch as ``write ✓`` / ``write ✗`` (symbol and colour); ``tight``: ``w✓``."""
    return Text(f"{name}{'' if tight else ' '}{'✓' if on else '✗'}", style="bold green" if on else "bold red")
