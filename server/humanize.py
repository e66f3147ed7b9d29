"""Times as people read them, for every front end (the CLI and the dashboard share these), and the one
written form of a time in what kms writes for agents and notes (``utc_iso``).

Pure functions of a timestamp and ``now`` (local time), so they are tested without a clock.
A missing time is ``-`` in a table cell and ``never`` in a sentence: the caller says which.
"""

from __future__ import annotations

import time

MISSING = "-"
NEVER = "never"


def _same_day(t: time.struct_time, n: time.struct_time) -> bool:
    return (t.tm_year, t.tm_yday) == (n.tm_year, n.tm_yday)


def stamp(ts: float | None, missing: str = NEVER) -> str:
    """``YYYY-MM-DD HH:MM``: a full date for listings that outlive the day (``kms log``)."""
    if ts is None:
        return missing
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def clock_time(ts: float | None, now: float, missing: str = MISSING) -> str:
    """``HH:MM:SS`` today, ``MM-DD HH:MM`` on other days."""
    if ts is None:
        return missing
    t = time.localtime(ts)
    return time.strftime("%H:%M:%S" if _same_day(t, time.localtime(now)) else "%m-%d %H:%M", t)


def short_time(ts: float | None, now: float, missing: str = MISSING) -> str:
    """``HH:MM`` today, ``MM-DD`` on other days (five cells)."""
    if ts is None:
        return missing
    t = time.localtime(ts)
    return time.strftime("%H:%M" if _same_day(t, time.localtime(now)) else "%m-%d", t)


def duration(seconds: float) -> str:
    """Compact, largest unit only: ``42s``, ``5m``, ``3h``, ``2d`` (negative counts as 0)."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def ago(ts: float | None, now: float, missing: str = MISSING) -> str:
    """``5m ago``; a time in the future (another machine's clock) reads ``0s ago``."""
    return missing if ts is None else f"{duration(now - ts)} ago"


def utc_iso(at: float) -> str:
    """A time as kms writes it in notes and answers: UTC, to the second (the same records give the same text
    anywhere)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
