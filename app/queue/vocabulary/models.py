"""Value objects passed between the SQL, the use cases and the front ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from app.queue.rules import policy
from app.queue.rules.retention import Retention
from app.queue.rules.sorting import NEWEST_FIRST, Sort, SortKey
from app.queue.rules.type_limits import TypeLimits, config_limits
from app.queue.vocabulary.states import PRIORITIES, Role, priority_label
from app.queue.vocabulary.trace import Trace


@dataclass(frozen=True)
class Actor:
    """The authenticated caller, whichever front end it came through."""

    id: int
    name: str
    role: Role
    max_priority: int = PRIORITIES["medium"]
    # Actions the policy already allowed during this request (see ``policy.require``).
    cleared: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def can(self, action: str, job: Job | None = None) -> bool:
        """Whether the permission policy lets this actor do ``action`` (to ``job``)."""
        return policy.can(self, action, job)

    @property
    def sees_errors(self) -> bool:
        """Error texts may hold what sanitizing missed: only admins read them, anywhere."""
        return self.can("see_errors")

    def priority_cap(self) -> int:
        """The highest priority this actor may enqueue."""
        return policy.priority_cap(self)


@dataclass(frozen=True)
class TypeSettings:
    """Lease and backoff for one job type (or the global defaults)."""

    lease_seconds: int
    backoff_base_seconds: float
    backoff_cap_seconds: float


@dataclass(frozen=True)
class QueueSettings:
    """The configuration the domain needs, read once from the app config."""

    job_types: tuple[str, ...]
    default: TypeSettings
    per_type: Mapping[str, TypeSettings]
    max_lease_seconds: int
    max_payload_bytes: int
    max_json_depth: int
    max_error_bytes: int
    recover_batch: int
    max_batch: int
    max_children: int  # children one job may spawn in all (MAX_CHILDREN_PER_JOB)
    # Flow control from JOB_TYPE_SETTINGS (max_running, rate_limit, paused): the defaults that
    # admins' overrides in the database replace (``type_limits.effective``).
    flow: Mapping[str, TypeLimits] = field(default_factory=dict)
    # How long finished jobs and audit rows are kept (RETENTION, AUDIT_RETENTION).
    retention: Retention = field(default_factory=Retention)
    prune_batch: int = 500  # jobs (and audit rows) per retention step

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> QueueSettings:
        """Build settings from a Flask-style config mapping."""
        default = TypeSettings(
            lease_seconds=int(config["LEASE_SECONDS"]),
            backoff_base_seconds=float(config["BACKOFF_BASE_SECONDS"]),
            backoff_cap_seconds=float(config["BACKOFF_CAP_SECONDS"]),
        )
        per_type = {
            name: TypeSettings(
                lease_seconds=int(over.get("lease_seconds", default.lease_seconds)),
                backoff_base_seconds=float(
                    over.get("backoff_base_seconds", default.backoff_base_seconds)
                ),
                backoff_cap_seconds=float(
                    over.get("backoff_cap_seconds", default.backoff_cap_seconds)
                ),
            )
            for name, over in dict(config.get("JOB_TYPE_SETTINGS") or {}).items()
        }
        return cls(
            job_types=tuple(config["JOB_TYPES"]),
            default=default,
            per_type=per_type,
            max_lease_seconds=int(config["MAX_LEASE_SECONDS"]),
            max_payload_bytes=int(config["MAX_PAYLOAD_BYTES"]),
            max_json_depth=int(config["MAX_JSON_DEPTH"]),
            max_error_bytes=int(config["MAX_ERROR_BYTES"]),
            recover_batch=int(config["RECOVER_BATCH"]),
            max_batch=int(config["MAX_BATCH"]),
            max_children=int(config["MAX_CHILDREN_PER_JOB"]),
            flow={
                name: limits
                for name, over in dict(config.get("JOB_TYPE_SETTINGS") or {}).items()
                if not (limits := config_limits(over)).free or limits.max_run_seconds
            },
            retention=Retention.from_config(config.get("RETENTION"), config.get("AUDIT_RETENTION")),
            prune_batch=int(config.get("PRUNE_BATCH_SIZE", 500)),
        )

    @cached_property
    def type_leases(self) -> tuple[tuple[str, int], ...]:
        """``(type, lease_seconds)`` for the types whose lease differs from the default."""
        return tuple(
            sorted(
                (name, s.lease_seconds)
                for name, s in self.per_type.items()
                if s.lease_seconds != self.default.lease_seconds
            )
        )

    def for_type(self, job_type: str) -> TypeSettings:
        """The lease and backoff that apply to ``job_type``."""
        return self.per_type.get(job_type, self.default)


@dataclass(frozen=True)
class Job:
    """One row of ``jobs``."""

    id: int
    type: str
    payload: dict[str, Any]
    priority: int
    status: str
    retry_count: int
    max_retries: int
    attempts: int
    idempotency_key: str | None
    request_fingerprint: str | None
    created_by: int
    run_at: datetime
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    lease_seconds: int | None
    worker_id: str | None
    progress: int | None
    progress_message: str | None
    result: dict[str, Any] | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    # The names of its secret payload fields, comma-separated (their values are never read
    # with the job: only a claim reads them, see ``secret_fields``).
    secret_names: str | None
    deadline_at: datetime | None  # when the running attempt must have finished (max_run_seconds)
    depends_on: list[int] | None  # the parents named at enqueue
    waiting_for: list[int] | None  # the parents not finished yet; None when none is awaited
    group_id: int | None  # the group it is a member of
    callback_of: int | None  # the group whose callback it is
    has_dependents: bool  # a job named it as a parent: its finish settles them
    parent_id: int | None  # the job whose worker spawned this one
    traceparent: str | None  # the enqueue's W3C trace context (``trace``)
    tracestate: str | None

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> Job:
        """Build a job from its field values in order (a row of the store's job columns).
        Lists build many: this skips the frozen ``__init__``'s ``__setattr__`` per field."""
        job = object.__new__(cls)
        job.__dict__.update(zip(_JOB_FIELDS, values, strict=True))
        return job

    @property
    def priority_label(self) -> str:
        return priority_label(self.priority)

    @property
    def secret_name_list(self) -> list[str]:
        """The names of the job's secrets, in the order they were sent ([] when none)."""
        return self.secret_names.split(",") if self.secret_names else []

    def as_seen_by(self, actor: Actor) -> Job:
        """The job as ``actor`` may see it: without the error text unless they may read it."""
        return self if actor.sees_errors else replace(self, error=None)


_JOB_FIELDS = tuple(Job.__dataclass_fields__)


@dataclass(frozen=True)
class Event:
    """One row of ``job_events``: a transition of a job."""

    id: int
    job_id: int
    at: datetime
    from_status: str | None
    to_status: str
    actor: str | None
    attempt: int | None
    kind: str
    error: str | None
    note: str | None

    def as_seen_by(self, actor: Actor) -> Event:
        """The event as ``actor`` may see it: without the error text unless they may read it."""
        return self if actor.sees_errors else replace(self, error=None)


@dataclass(frozen=True)
class EnqueueRequest:
    """A validated enqueue request, defaults applied."""

    type: str
    payload: dict[str, Any]
    priority: int
    max_retries: int
    idempotency_key: str | None
    run_at: datetime | None
    delay_seconds: float | None
    fingerprint: str | None  # of the fields that define the request; None without a key
    # Uniqueness while active (``uniqueness``): None, no check.
    unique_key: str | None = None
    unique_for: float | None = None
    # Secret payload fields: their names, and their values already sealed (``secret_fields``).
    secret_names: tuple[str, ...] = ()
    sealed_secrets: str | None = None
    # Dependencies (``workflows``): parents by id, earlier items of the same batch by index, and
    # what a parent's failure does ("cancel" or "run").
    depends_on: tuple[int, ...] = ()
    after_items: tuple[int, ...] = ()
    on_dependency_failure: str = "cancel"
    # Set by the front end, not the body: the spawning job and the request's trace headers.
    parent_id: int | None = None
    trace: Trace | None = None


def parent_of(requests: Sequence[EnqueueRequest]) -> int | None:
    """The job whose children ``requests`` are (a spawn's items share their parent), or None:
    the namespace of their idempotency and unique keys and of the parents they may name."""
    parents = {request.parent_id for request in requests}
    assert len(parents) <= 1, "a batch's items are children of one job, or of none"
    return next(iter(parents), None)


@dataclass(frozen=True)
class Outcome:
    """A worker's report on one attempt: completed (with ``result``) or failed (with ``error``,
    and optionally ``retry_in`` and ``retryable``)."""

    job_id: int
    attempt: int | None  # None: whichever attempt the caller holds (the single routes)
    completed: bool
    result: dict[str, Any] | None = None
    error: str | None = None
    retry_in: float | None = None
    retryable: bool | None = None


@dataclass(frozen=True)
class Wanted:
    """What a claim asks for: up to ``max_jobs`` jobs (of ``types``; None: any type), with a
    lease of ``lease_seconds`` (None: the type's), waiting up to ``wait_seconds`` for one."""

    max_jobs: int
    types: tuple[str, ...] | None = None
    lease_seconds: int | None = None
    wait_seconds: float = 0.0


@dataclass(frozen=True)
class Beat:
    """One heartbeat of a job the worker holds at ``attempt``."""

    job_id: int
    attempt: int | None  # None: whichever attempt the caller holds (the single routes)
    progress: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class Keyset:
    """Where a page starts: strictly ``before`` or ``after`` the job whose sort key is ``key``,
    in the ascending form of the list's order (``sorting.KEY_COLUMNS``)."""

    direction: str  # "before" or "after"
    key: tuple[Any, ...]


@dataclass(frozen=True)
class JobFilters:
    """Validated list filters, the order and the page: its size and where it starts."""

    status: str | None = None
    type: str | None = None
    priority: int | None = None
    search: str | None = None
    limit: int = 50
    cursor: Keyset | None = None
    sort: Sort = NEWEST_FIRST

    @property
    def rising(self) -> bool:
        """Whether a page walks its order upward: forward in an ascending order, or back (from
        an ``after`` cursor) in a descending one."""
        if self.cursor is not None:
            return self.cursor.direction == "after"
        return not self.sort.descending

    @property
    def before_id(self) -> int | None:
        """In the order of creation: only ids below this (older)."""
        return self._id_cursor("before")

    @property
    def after_id(self) -> int | None:
        """In the order of creation: only ids above this (newer)."""
        return self._id_cursor("after")

    def _id_cursor(self, direction: str) -> int | None:
        cursor = self.cursor
        if cursor is None or cursor.direction != direction or self.sort.key != SortKey.CREATED:
            return None
        return int(cursor.key[0])


@dataclass(frozen=True)
class JobPage:
    """One page of a job listing, in the list's order."""

    jobs: list[Job]
    next_cursor: str | None
    prev_cursor: str | None = None
