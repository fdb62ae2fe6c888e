"""What the API answers, as typed objects: a Job, an Event, a job type, a schedule, and the
timestamp format. Each mirrors a response model of the server's ``/openapi.json`` (``Job`` is
``JobOut``, ``Event`` ``EventOut``, ``JobType`` ``TypeOut``, ``Schedule`` ``ScheduleOut``) field
for field: a field the server always sends has no default here, one it may leave out has the
server's default. ``client/tests/test_wire_contract.py`` fails on any drift."""

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
    """A job as the API shows it. ``error`` is set only for admins; ``secrets`` only on a job
    this worker claimed (every other answer names them in ``secret_names``); ``duplicate`` is
    True when a unique enqueue answered an active job instead of adding one; ``extra`` holds any
    field this client does not know."""

    _TIMES: ClassVar[frozenset[str]] = frozenset(
        {
            "run_at",
            "claimed_at",
            "lease_expires_at",
            "created_at",
            "updated_at",
            "finished_at",
            "deadline_at",
        }
    )

    id: int
    type: str
    payload: dict[str, Any]
    priority: str
    status: str
    retry_count: int
    max_retries: int
    attempt: int
    idempotency_key: str | None
    run_at: datetime
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    worker_id: str | None
    progress: int | None
    progress_message: str | None
    result: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    secret_names: list[str]
    deadline_at: datetime | None  # while running: the type's max_run_seconds from the claim
    depends_on: list[int]  # the parents named at enqueue
    waiting_for: list[int]  # the parents not finished yet
    group_id: int | None
    parent_id: int | None  # the job whose worker spawned this one
    trace: dict[str, Any] | None  # {"traceparent", "tracestate"} of the enqueue, if any
    partition: str | None  # the partition it is claimed fairly in; None: the partition null
    error: str | None = None
    # Only in a claim's answer, to the worker that holds the job: kept out of repr, so a job
    # printed or logged never shows them.
    secrets: dict[str, str] | None = field(default=None, repr=False)
    # Only in a claim's answer of a job with ``depends_on``: each parent's id, type, status and
    # result, in ``depends_on`` order.
    parents: list[dict[str, Any]] | None = None
    duplicate: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Event(_FromJson):
    """One transition in a job's history (oldest first in ``Client.events``)."""

    _TIMES: ClassVar[frozenset[str]] = frozenset({"at"})

    id: int
    at: datetime
    kind: str
    from_status: str | None
    to_status: str
    actor: str | None
    attempt: int | None
    note: str | None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobType(_FromJson):
    """A job type as admins see it: jobs per status and the limits claims obey now (the
    server's configuration merged with admins' overrides; None: no limit)."""

    type: str
    counts: dict[str, int]
    max_running: int | None
    rate_limit: str | None
    paused: bool
    max_run_seconds: int | None
    partition_max_running: int | None
    partition_rate_limit: str | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Schedule(_FromJson):
    """A schedule: a cron expression in a time zone that enqueues one job per fire time.
    ``next_runs`` are the next five fire times (UTC), empty while disabled."""

    _TIMES: ClassVar[frozenset[str]] = frozenset({"last_run_at", "created_at", "updated_at"})

    id: int
    name: str
    cron: str
    description: str
    timezone: str
    type: str
    payload: dict[str, Any]
    priority: str
    enabled: bool
    catch_up: str
    next_runs: list[datetime]
    last_run_at: datetime | None
    created_at: datetime
    updated_at: datetime
    partition: str | None  # of the jobs it enqueues
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.next_runs = [when for when in map(parse_time, self.next_runs) if when is not None]
