"""The job values the SQL returns and the use cases pass on: jobs, their events, the requests
and reports that make and move them, list filters and pages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.queue.vocabulary.job_fields import DEFAULT_ON_DEPENDENCY_FAILURE
from app.queue.vocabulary.orders import NEWEST_FIRST, Sort, SortKey
from app.queue.vocabulary.states import priority_label
from app.queue.vocabulary.trace import Trace


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
    partition: str | None  # the partition it is claimed fairly in; None: the partition null

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
    on_dependency_failure: str = DEFAULT_ON_DEPENDENCY_FAILURE
    partition: str | None = None  # None: the partition null
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
class JobEdit:
    """What an admin's retry replaces (None: kept as it was), validated as at enqueue, and
    why (``reason``, for the events and the audit log)."""

    payload: dict[str, Any] | None = None
    priority: int | None = None
    max_retries: int | None = None
    reason: str | None = None

    def changes(self, job: Job) -> dict[str, Any]:
        """The fields this edit gives a value other than ``job``'s, by column name, in the
        order the API lists them (payloads compared as JSON: ``true`` is not ``1``)."""
        given = {
            "payload": self.payload,
            "priority": self.priority,
            "max_retries": self.max_retries,
        }
        return {
            name: value
            for name, value in given.items()
            if value is not None and _as_json(value) != _as_json(getattr(job, name))
        }


def _as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


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
    logs: tuple[str, ...] = ()  # attempt-log lines carried with the report, stored if it lands


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
    logs: tuple[str, ...] = ()  # attempt-log lines carried with the beat, stored if it lands


@dataclass(frozen=True)
class Keyset:
    """Where a page starts: strictly ``before`` or ``after`` the job whose sort key is ``key``,
    in the ascending form of the list's order (``orders.KEY_COLUMNS``)."""

    direction: str  # "before" or "after"
    key: tuple[Any, ...]


@dataclass(frozen=True)
class JobFilters:
    """Validated list filters, the order and the page: its size and where it starts."""

    status: str | None = None
    type: str | None = None
    priority: int | None = None
    search: str | None = None
    partition: str | None = None
    payload: str | None = None  # JSON text of an object the payload must contain
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


@dataclass(frozen=True)
class ParentResult:
    """What the worker of a dependent job learns of one parent: what it was, how it ended and
    what it returned (never its payload or error)."""

    id: int
    type: str
    status: str
    result: dict[str, Any] | None
