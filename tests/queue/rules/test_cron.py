"""Cron expressions read in a time zone, across DST changes, and the refusals people see."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.queue.rules import cron


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_fire_times_follow_the_zone_through_the_seasons() -> None:
    # 09:00 in Paris is 08:00 UTC in winter and 07:00 UTC in summer (DST began 2026-03-29).
    times = cron.upcoming("0 9 * * *", "Europe/Paris", utc(2026, 3, 27, 12), 3)
    assert times == [utc(2026, 3, 28, 8), utc(2026, 3, 29, 7), utc(2026, 3, 30, 7)]


def test_a_time_in_the_spring_gap_fires_once_right_after_it() -> None:
    # 02:30 does not exist in Berlin on 2026-03-29 (02:00 -> 03:00): it fires at 03:00 CEST.
    times = cron.upcoming("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12), 3)
    assert times == [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30), utc(2026, 3, 31, 0, 30)]


def test_a_fixed_time_in_the_repeated_hour_fires_once() -> None:
    # 01:30 happens twice in New York on 2026-11-01: the job runs at the first one only.
    times = cron.upcoming("30 1 * * *", "America/New_York", utc(2026, 10, 31, 12), 3)
    assert times == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30), utc(2026, 11, 3, 6, 30)]


def test_fire_times_are_strictly_after_the_start() -> None:
    assert cron.next_after("0 * * * *", "UTC", utc(2030, 1, 1, 10)) == utc(2030, 1, 1, 11)
    assert cron.latest_at_or_before("0 * * * *", "UTC", utc(2030, 1, 1, 10)) == utc(2030, 1, 1, 10)
    assert cron.latest_at_or_before("0 * * * *", "UTC", utc(2030, 1, 1, 10, 59)) == utc(
        2030, 1, 1, 10
    )


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("* * * *", "must have five fields"),
        ("0 0 * * * *", "must have five fields"),
        ("61 * * * *", "bad minute"),
        ("* 24 * * *", "bad hour"),
        ("0 0 31 2 *", "bad day"),
        ("x y z w v", "not a valid cron expression"),
        ("* * " + "1," * 60 + "1 * *", "at most 100"),
        ("0 0 * * MON#9", "not a valid cron expression"),
        ("0 0 1 * é", "ASCII"),
    ],
)
def test_bad_expressions_say_why(expression: str, problem: str) -> None:
    found = cron.cron_problem(expression)
    assert found is not None and problem in found


@pytest.mark.parametrize("expression", ["* * * * *", "*/15 9-17 * * MON-FRI", "0 0 L * *"])
def test_good_expressions_pass(expression: str) -> None:
    assert cron.cron_problem(expression) is None


@pytest.mark.parametrize("name", ["", "Mars/Olympus", "../../etc/passwd", "UTC\x00", "x" * 65])
def test_unknown_zones_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="time zone"):
        cron.zone(name)


def test_describe_says_it_in_words() -> None:
    assert cron.describe("0 9 * * 1-5") == "At 09:00 on Monday through Friday"
