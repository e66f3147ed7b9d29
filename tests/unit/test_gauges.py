"""The write gauge: one formula for every view, with a session's limits known before it writes."""

from __future__ import annotations

import apsw
import pytest

from server.activity.feed import session_overview
from server.activity.ratelimit import RateLimiter, record_limits, session_gauges
from server.activity.session_registry import start_session
from server.errors import KmsError

NOW = 1_800_000_000.0


def limiter(per_minute: int | None, per_session: int | None, now: list[float]) -> RateLimiter:
    return RateLimiter(per_minute, per_session, clock=lambda: now[0])


def test_a_session_that_has_not_written_shows_its_limits(conn: apsw.Connection) -> None:
    start_session(conn, session_id="sfresh", now=NOW)
    record_limits(conn, "sfresh", limiter(10, 200, [NOW]))
    [info] = session_overview(conn, NOW)
    g = info.gauge
    assert (g.minute_text, g.total_text, g.limited) == ("0/10", "0/200", False)


def test_unlimited_reads_infinite_and_unknown_reads_nothing(conn: apsw.Connection) -> None:
    start_session(conn, session_id="sfree", now=NOW)
    start_session(conn, session_id="sread", now=NOW - 1)  # read-only: no limits on record
    record_limits(conn, "sfree", limiter(None, None, [NOW]))
    gauges = {s.id: s.gauge for s in session_overview(conn, NOW)}
    assert (gauges["sfree"].minute_text, gauges["sfree"].total_text) == ("0/∞", "0/∞")
    assert (gauges["sread"].minute_text, gauges["sread"].total_text) == ("0/-", "0/-")


def test_the_window_slides_and_the_total_runs_out(conn: apsw.Connection) -> None:
    now = [NOW]
    lim = limiter(2, 3, now)
    lim.acquire(conn, "s")
    now[0] += 1
    lim.acquire(conn, "s")
    g = session_gauges(conn, now[0])["s"]
    assert (g.minute_text, g.total_text) == ("2/2", "2/3")
    assert g.next_write_at == pytest.approx(NOW + 60) and g.limited and not g.exhausted
    with pytest.raises(KmsError) as e:
        lim.acquire(conn, "s")
    assert e.value.kind == "rate-limited"
    assert session_gauges(conn, NOW + 60.5)["s"].next_write_at is None
    now[0] = NOW + 61.5
    lim.acquire(conn, "s")
    g = session_gauges(conn, now[0])["s"]
    assert (g.minute_text, g.total_text, g.exhausted, g.next_write_at) == ("1/2", "3/3", True, None)


def test_recording_limits_again_keeps_the_counts(conn: apsw.Connection) -> None:
    now = [NOW]
    limiter(5, 50, now).acquire(conn, "s")
    record_limits(conn, "s", limiter(7, 70, now))  # a later server process of the same session
    g = session_gauges(conn, NOW)["s"]
    assert (g.minute_text, g.total_text) == ("1/7", "1/70")
