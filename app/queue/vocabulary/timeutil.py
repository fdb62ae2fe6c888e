"""The wall clock, read only at the edges (views, CLI) and passed inward as ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def human_duration(value: timedelta) -> str:
    """A duration for people, such as ``3 h 05 min`` or ``42 s``."""
    seconds = int(value.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def iso(value: datetime | None) -> str | None:
    """ISO 8601 UTC with a ``Z``, the only timestamp format the API speaks."""
    if value is None:
        return None
    # isoformat, not strftime("%Y"): glibc writes year 1 as "1", which is not ISO 8601.
    if value.tzinfo is UTC:  # what the database hands back: only "+00:00" becomes "Z"
        # Without timespec (parsing it costs a third of the call) isoformat leaves out zero
        # microseconds, which the API always writes.
        text = value.isoformat()[:-6]
        return text + "Z" if value.microsecond else text + ".000000Z"
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
