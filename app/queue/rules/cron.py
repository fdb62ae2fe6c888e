"""Cron expressions in a time zone: checking them and listing their fire times in UTC.

Parsing and stepping are cronsim's (it follows Debian cron, DST quirks included: a time that
falls in a spring-forward gap fires right after the gap, and a fixed time in a repeated hour
fires once). Everything here is pure: the start time is always an argument.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import islice
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

MAX_CRON_LENGTH = 100
MAX_TIMEZONE_LENGTH = 64


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; ``ValueError`` saying why when there is no such zone."""
    if not name or len(name) > MAX_TIMEZONE_LENGTH or not name.isascii() or "\x00" in name:
        raise ValueError("must be an IANA time zone name such as UTC or Europe/Paris")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            "is not a known IANA time zone (e.g. UTC, Europe/Paris, America/New_York)"
        ) from None


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is not a usable five-field cron expression, or None."""
    if len(expression) > MAX_CRON_LENGTH or not expression.isascii():
        return f"must be at most {MAX_CRON_LENGTH} ASCII characters"
    if len(expression.split()) != 5:
        return "must have five fields: minute hour day-of-month month day-of-week"
    try:
        first = fire_times(expression, "UTC", datetime(2000, 1, 1, tzinfo=UTC))
        next(first)
    except CronSimError as exc:
        return f"is not a valid cron expression ({str(exc).lower()})"
    except StopIteration:
        return "never fires"
    return None


def describe(expression: str) -> str:
    """The expression in words, e.g. "At 09:00 on Monday through Friday"."""
    return CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC)).explain()


def fire_times(expression: str, timezone: str, after: datetime) -> Iterator[datetime]:
    """The fire times strictly after ``after``, as aware UTC datetimes, in order.

    The expression is read in ``timezone``: "0 9 * * *" in Europe/Paris is 09:00 Paris time,
    08:00 or 07:00 UTC depending on the season."""
    start = after.astimezone(zone(timezone))
    for local in CronSim(expression, start):
        yield local.astimezone(UTC)


def next_after(expression: str, timezone: str, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after`` (None if it never fires again)."""
    return next(fire_times(expression, timezone, after), None)


def latest_at_or_before(expression: str, timezone: str, at: datetime) -> datetime | None:
    """The last fire time at or before ``at`` (None if there was none in the past 50 years)."""
    # cronsim steps backwards strictly before its start, at whole seconds: one second past
    # ``at`` includes a slot that falls on ``at`` itself.
    start = (at + timedelta(seconds=1)).astimezone(zone(timezone))
    found = next(CronSim(expression, start, reverse=True), None)
    return found.astimezone(UTC) if found is not None else None


def upcoming(expression: str, timezone: str, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times strictly after ``after``."""
    return list(islice(fire_times(expression, timezone, after), count))
