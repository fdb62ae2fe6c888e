"""What the API answers, as typed objects: a Job, an Event, and the timestamp format."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound="_FromJson")


def parse_time(value: Any) -> datetime | None:
    """An API timestamp (ISO 8601, UTC with ``Z``) as an aware datetime; None stays None."""
    if value is None:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def format_time(value: datetime | str) -> str:
    """A datetime as the API takes it (UTC, ``Z``); strings pass through unchanged.
    Naive datetimes are refused: their time zone would be a guess."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("run_at must be an aware datetime (give it a tzinfo, e.g. UTC)")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class _FromJson:
    """Build a dataclass from an API object: known keys become fields, timestamps datetimes,
    and keys a newer server adds land in ``extra`` instead of breaking old clients."""

    _TIMES: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_json(cls: type[T], data: dict[str, Any]) -> T:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}  # type: ignore[arg-type]
        known = {
            k: (parse_time(v) if k in cls._TIMES else v) for k, v in data.items() if k in names
        }
        extra = {k: v for k, v in data.items() if k not in names}
        return cls(**known, extra=extra)  # type: ignore[call-arg]


@dataclass
class Job(_FromJson):
    """A job as the API shows it. ``error`` is set only for admins; ``extra`` holds any field
    this client does not know (e.g. ``duplicate`` on a unique enqueue)."""

    _TIMES: ClassVar[frozenset[str]] = frozenset(
        {"run_at", "claimed_at", "lease_expires_at", "created_at", "updated_at", "finished_at"}
    )

    id: int
    type: str
    status: str
    payload: dict[str, Any] = field(default_factory=dict)
    priority: str = "low"
    retry_count: int = 0
    max_retries: int = 0
    attempt: int = 0
    idempotency_key: str | None = None
    run_at: datetime | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    worker_id: str | None = None
    progress: int | None = None
    progress_message: str | None = None
    result: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    parent_id: int | None = None
    trace: dict[str, Any] | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Event(_FromJson):
    """One transition in a job's history (oldest first in ``Client.events``)."""

    _TIMES: ClassVar[frozenset[str]] = frozenset({"at"})

    id: int
    at: datetime | None = None
    kind: str = ""
    from_status: str | None = None
    to_status: str | None = None
    actor: str | None = None
    attempt: int | None = None
    note: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobType(_FromJson):
    """A job type as admins see it: jobs per status and the limits claims obey now (the
    server's configuration merged with admins' overrides; None: no limit)."""

    type: str
    counts: dict[str, int] = field(default_factory=dict)
    max_running: int | None = None
    rate_limit: str | None = None
    paused: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Schedule(_FromJson):
    """A schedule: a cron expression in a time zone that enqueues one job per fire time.
    ``next_runs`` are the next five fire times (UTC), empty while disabled."""

    _TIMES: ClassVar[frozenset[str]] = frozenset({"last_run_at", "created_at", "updated_at"})

    id: int
    name: str
    cron: str
    type: str
    description: str = ""
    timezone: str = "UTC"
    payload: dict[str, Any] = field(default_factory=dict)
    priority: str = "low"
    enabled: bool = True
    catch_up: str = "skip"
    next_runs: list[datetime] = field(default_factory=list)
    last_run_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.next_runs = [when for when in map(parse_time, self.next_runs) if when is not None]
