"""Times as the CLI and the dashboard show them: one set of pure functions of ``now``."""

from __future__ import annotations

import time

import pytest

from server import humanize

NOW = time.mktime((2026, 3, 14, 15, 9, 26, 0, 0, -1))  # local 2026-03-14 15:09:26


def test_duration_picks_the_largest_unit() -> None:
    assert [humanize.duration(s) for s in (-5, 0, 42, 60, 3599, 3600, 86399, 86400 * 3)] == [
        "0s",
        "0s",
        "42s",
        "1m",
        "59m",
        "1h",
        "23h",
        "3d",
    ]


def test_ago_and_its_missing_word() -> None:
    assert humanize.ago(NOW - 125, NOW) == "2m ago"
    assert humanize.ago(NOW + 30, NOW) == "0s ago"  # a clock ahead of ours is not "in the future"
    assert humanize.ago(None, NOW) == "-"
    assert humanize.ago(None, NOW, humanize.NEVER) == "never"


@pytest.mark.parametrize(
    ("ts", "clock", "short"),
    [
        (NOW - 60, "15:08:26", "15:08"),
        (NOW - 86400, "03-13 15:09", "03-13"),  # yesterday: the date, not a misleading time of day
        (None, "-", "-"),
    ],
)
def test_clock_and_short_time_show_the_date_on_other_days(ts: float | None, clock: str, short: str) -> None:
    assert humanize.clock_time(ts, NOW) == clock
    assert humanize.short_time(ts, NOW) == short


def test_stamp_is_a_full_local_date() -> None:
    assert humanize.stamp(NOW) == "2026-03-14 15:09"
    assert humanize.stamp(None) == "never"
    assert humanize.stamp(None, "-") == "-"
