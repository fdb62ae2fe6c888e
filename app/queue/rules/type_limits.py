"""Per-type flow control as rules: limits from the configuration merged with admins' overrides,
fixed rate-limit windows, and how many jobs of a type a claim may still hand out. No SQL here
(``type_limits_sql``) and no claiming (``claiming``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from app.queue.vocabulary.limits import Window

WINDOW_SECONDS = {"second": 1, "minute": 60, "hour": 3600}
MAX_RUNNING_LIMIT = 1_000_000
MAX_RATE_COUNT = 999_999_999
RATE_LIMIT_PATTERN = r"^[1-9][0-9]{0,8}/(second|minute|hour)$"
_RATE = re.compile(RATE_LIMIT_PATTERN)
MAX_RUN_SECONDS_LIMIT = 31_536_000  # a year
UNLIMITED = 1 << 62  # the room under no limit: more than any claim asks for
FLOW_KEYS = (
    "max_running",
    "rate_limit",
    "paused",
    "max_run_seconds",
    "partition_max_running",
    "partition_rate_limit",
)
NO_LIMIT = ", or null for no limit"  # how the API clears an override (a form leaves it empty)
MAX_RUNNING_RULE = f"must be an integer from 1 to {MAX_RUNNING_LIMIT:,}{NO_LIMIT}"
MAX_RUN_SECONDS_RULE = f"must be an integer from 1 to {MAX_RUN_SECONDS_LIMIT:,} (seconds){NO_LIMIT}"
RATE_LIMIT_RULE = (
    'must be "N/second", "N/minute" or "N/hour" (N from 1 to 999,999,999, e.g. "10/minute")'
    + NO_LIMIT
)


@dataclass(frozen=True)
class RateLimit:
    """At most ``count`` claims of a type per fixed window of one ``unit``."""

    count: int
    unit: str

    @classmethod
    def parse(cls, text: object) -> RateLimit:
        """``"10/minute"`` as a rate limit; ValueError saying the rule otherwise."""
        match = _RATE.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(RATE_LIMIT_RULE)
        count, unit = match[0].split("/")
        return cls(int(count), unit)

    @property
    def seconds(self) -> int:
        return WINDOW_SECONDS[self.unit]

    def window_start(self, now: datetime) -> datetime:
        """The window ``now`` falls in. Windows start at whole multiples of their length since
        the Unix epoch (UTC), so every process and app server agrees on them."""
        start = math.floor(now.timestamp() / self.seconds) * self.seconds
        return datetime.fromtimestamp(start, UTC)

    def __str__(self) -> str:
        return f"{self.count}/{self.unit}"


@dataclass(frozen=True)
class TypeLimits:
    """The flow settings of one job type; None is no limit. ``max_run_seconds`` bounds each
    attempt's run (the claim sets its deadline), not what claims hand out. The ``partition_``
    limits apply in each partition of the type on its own (the jobs without a partition are
    one partition too)."""

    max_running: int | None = None
    rate_limit: RateLimit | None = None
    paused: bool = False
    max_run_seconds: int | None = None
    partition_max_running: int | None = None
    partition_rate_limit: RateLimit | None = None

    @property
    def partitioned(self) -> bool:
        """Whether a claim must count per partition before it hands out a job of this type."""
        return self.partition_max_running is not None or self.partition_rate_limit is not None

    @property
    def limited(self) -> bool:
        """Whether a claim must count (take the type's turn) before it hands out a job of
        this type."""
        return self.max_running is not None or self.rate_limit is not None or self.partitioned

    @property
    def free(self) -> bool:
        """No limit and not paused: claims hand its jobs out as they come."""
        return not self.limited and not self.paused


class Overriding(Protocol):
    """What an override sets over the configuration (None: the configured value applies)."""

    @property
    def max_running(self) -> int | None: ...
    @property
    def rate_limit(self) -> str | None: ...
    @property
    def paused(self) -> bool | None: ...
    @property
    def max_run_seconds(self) -> int | None: ...
    @property
    def partition_max_running(self) -> int | None: ...
    @property
    def partition_rate_limit(self) -> str | None: ...


def config_limits(entry: Mapping[str, Any]) -> TypeLimits:
    """The flow keys of one ``JOB_TYPE_SETTINGS`` entry; ValueError names the key and the rule."""
    max_running, partition_running = (
        _config_running(entry, key) for key in ("max_running", "partition_max_running")
    )
    rate, partition_rate = (
        _config_rate(entry, key) for key in ("rate_limit", "partition_rate_limit")
    )
    paused = entry.get("paused", False)
    if type(paused) is not bool:
        raise ValueError("paused must be true or false")
    run = entry.get("max_run_seconds")
    if run is not None and not (type(run) is int and 1 <= run <= MAX_RUN_SECONDS_LIMIT):
        raise ValueError(f"max_run_seconds {MAX_RUN_SECONDS_RULE}")
    return TypeLimits(max_running, rate, paused, run, partition_running, partition_rate)


def _config_running(entry: Mapping[str, Any], key: str) -> int | None:
    value = entry.get(key)
    if value is not None and not (type(value) is int and 1 <= value <= MAX_RUNNING_LIMIT):
        raise ValueError(f"{key} {MAX_RUNNING_RULE}")
    return value


def _config_rate(entry: Mapping[str, Any], key: str) -> RateLimit | None:
    value = entry.get(key)
    try:
        return None if value is None else RateLimit.parse(value)
    except ValueError as exc:
        raise ValueError(f"{key} {exc}") from None


def effective(configured: TypeLimits, override: Overriding | None) -> TypeLimits:
    """The limits that apply: each overridden value replaces the configuration's."""
    if override is None:
        return configured
    limits = configured
    if override.max_running is not None:
        limits = replace(limits, max_running=override.max_running)
    if override.rate_limit is not None:
        limits = replace(limits, rate_limit=RateLimit.parse(override.rate_limit))
    if override.paused is not None:
        limits = replace(limits, paused=override.paused)
    if override.max_run_seconds is not None:
        limits = replace(limits, max_run_seconds=override.max_run_seconds)
    if override.partition_max_running is not None:
        limits = replace(limits, partition_max_running=override.partition_max_running)
    if override.partition_rate_limit is not None:
        rate = RateLimit.parse(override.partition_rate_limit)
        limits = replace(limits, partition_rate_limit=rate)
    return limits


def run_limits(
    configured: Mapping[str, TypeLimits], overrides: Mapping[str, Overriding]
) -> tuple[tuple[str, int], ...]:
    """``(type, max_run_seconds)`` of every type whose attempts have a time limit, by type:
    what a claim stamps on the attempts it hands out as their deadlines."""
    found = []
    for name in configured.keys() | overrides.keys():
        seconds = effective(configured.get(name, TypeLimits()), overrides.get(name)).max_run_seconds
        if seconds is not None:
            found.append((name, seconds))
    return tuple(sorted(found))


def effective_all(
    configured: Mapping[str, TypeLimits], overrides: Mapping[str, Overriding]
) -> dict[str, TypeLimits]:
    """The types that are limited or paused, with their effective limits (free types are left
    out: a claim of them counts nothing)."""
    found = {}
    for name in configured.keys() | overrides.keys():
        limits = effective(configured.get(name, TypeLimits()), overrides.get(name))
        if not limits.free:
            found[name] = limits
    return found


def window_claims(rate: RateLimit, stored: Window | None, now: datetime) -> int:
    """The claims already counted in the window of ``now``.

    A stored window that ends before ``now``'s starts counts nothing. A stored window inside
    ``now``'s (the unit changed) counts what it counted. A stored window after ``now``'s (this
    server's clock is behind, or the claim waited on the lock past a boundary) counts as full:
    every claim is counted in the window of its own ``now``, so no window ever holds more than
    the limit."""
    start = rate.window_start(now)
    if stored is None or stored.started_at < start:
        return 0
    if stored.started_at < start + timedelta(seconds=rate.seconds):
        return stored.claims
    return rate.count


def allowance(limits: TypeLimits, *, running: int, claims_in_window: int) -> int:
    """How many jobs of a limited type a claim may still hand out (never below 0; a type
    limited only per partition: as many as it asks for)."""
    return room(limits.max_running, limits.rate_limit, running, claims_in_window)


def room(
    max_running: int | None, rate: RateLimit | None, running: int, claims_in_window: int
) -> int:
    """How many more jobs fit under ``max_running`` and ``rate`` (None: no such limit)."""
    found = [UNLIMITED]
    if max_running is not None:
        found.append(max_running - running)
    if rate is not None:
        found.append(rate.count - claims_in_window)
    return max(0, min(found))
