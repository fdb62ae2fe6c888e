"""Job states, priorities and roles: the vocabulary shared by the API, the pages and the SQL;
and the state graph (``EDGES``), every move a job can make, declared once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class JobStatus(StrEnum):
    """Where a job is in its life."""

    PENDING = "pending"  # waiting for run_at, then for a worker
    RUNNING = "running"  # claimed; held by one worker until its lease expires
    COMPLETED = "completed"  # a worker finished it (terminal)
    FAILED = (
        "failed"  # the last attempt failed and no retry is left (terminal until an admin retry)
    )
    CANCELLED = "cancelled"  # stopped by its producer or an admin (terminal until an admin retry)


TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})
RETRYABLE = frozenset({JobStatus.FAILED, JobStatus.CANCELLED})


class EventKind(StrEnum):
    """Why a row of ``job_events`` was written: one kind per edge of the state graph."""

    ENQUEUED = "enqueued"  # the job was created (no edge: it has no "from" status)
    CLAIMED = "claimed"  # a worker took it
    COMPLETED = "completed"  # its worker finished it
    RETRY_SCHEDULED = "retry_scheduled"  # an attempt failed; it waits out its backoff
    FAILED = "failed"  # the last attempt failed (or was not retryable)
    LEASE_EXPIRED = "lease_expired"  # its worker went silent; a failed attempt
    CANCELLED = "cancelled"  # its producer or an admin stopped it
    RETRIED = "retried"  # an admin put it back in the queue
    RELEASED = "released"  # its worker handed it back unstarted, no attempt counted
    TIMED_OUT = "timed_out"  # the attempt ran past its type's max_run_seconds; a failed attempt
    RUN_NOW = "run_now"  # its owner or an admin made a waiting job due at once
    # An admin changed fields of a failed or cancelled job as it retried it (no edge: it
    # comes with the retry's ``retried`` event and names the fields, never their values).
    EDITED = "edited"


class Role(StrEnum):
    """What a user may do (see the role table in the design)."""

    PRODUCER = "producer"  # enqueues and watches its own jobs
    WORKER = "worker"  # claims and finishes jobs
    ADMIN = "admin"  # everything, and the only one to see errors
    MONITOR = "monitor"  # reads /metrics and nothing else


PRIORITIES: dict[str, int] = {"low": 0, "medium": 10, "high": 20, "critical": 30}
PRIORITY_LABELS: dict[int, str] = {number: label for label, number in PRIORITIES.items()}


def priority_label(number: int) -> str:
    """Map a stored priority number to its API label."""
    return PRIORITY_LABELS[number]


class Edge(StrEnum):
    """The name of each edge: what callers pass, so a misspelt edge fails the type check."""

    CLAIM = "claim"
    COMPLETE = "complete"
    FAIL_WITH_RETRY = "fail_with_retry"
    FAIL_FOR_GOOD = "fail_for_good"
    LEASE_EXPIRED_WITH_RETRY = "lease_expired_with_retry"
    LEASE_EXPIRED_FOR_GOOD = "lease_expired_for_good"
    TIMED_OUT_WITH_RETRY = "timed_out_with_retry"
    TIMED_OUT_FOR_GOOD = "timed_out_for_good"
    RELEASE = "release"
    CANCEL = "cancel"
    RETRY = "retry"
    RUN_NOW = "run_now"


@dataclass(frozen=True)
class Arrow:
    """One arrow of the lifecycle diagram (README, "Job lifecycle")."""

    label: str  # the arrow's words in the diagram
    sources: frozenset[JobStatus]
    target: JobStatus
    kind: EventKind


def _edge(label: str, sources: set[JobStatus], target: JobStatus, kind: EventKind) -> Arrow:
    return Arrow(label, frozenset(sources), target, kind)


# Every allowed move, declared once; transitions take their WHERE status IN (...) here.
_PENDING, _RUNNING = JobStatus.PENDING, JobStatus.RUNNING
_FAILED, _CANCELLED = JobStatus.FAILED, JobStatus.CANCELLED
_RETRIES_LEFT, _NO_RETRY_LEFT = "retries left", "no retry left"
EDGES: dict[Edge, Arrow] = {
    Edge.CLAIM: _edge("claim", {_PENDING}, _RUNNING, EventKind.CLAIMED),
    Edge.COMPLETE: _edge("complete", {_RUNNING}, JobStatus.COMPLETED, EventKind.COMPLETED),
    Edge.FAIL_WITH_RETRY: _edge(
        f"fail, {_RETRIES_LEFT}", {_RUNNING}, _PENDING, EventKind.RETRY_SCHEDULED
    ),
    Edge.FAIL_FOR_GOOD: _edge(f"fail, {_NO_RETRY_LEFT}", {_RUNNING}, _FAILED, EventKind.FAILED),
    Edge.LEASE_EXPIRED_WITH_RETRY: _edge(
        f"lease expired, {_RETRIES_LEFT}", {_RUNNING}, _PENDING, EventKind.LEASE_EXPIRED
    ),
    Edge.LEASE_EXPIRED_FOR_GOOD: _edge(
        f"lease expired, {_NO_RETRY_LEFT}", {_RUNNING}, _FAILED, EventKind.LEASE_EXPIRED
    ),
    Edge.TIMED_OUT_WITH_RETRY: _edge(
        f"ran too long, {_RETRIES_LEFT}", {_RUNNING}, _PENDING, EventKind.TIMED_OUT
    ),
    Edge.TIMED_OUT_FOR_GOOD: _edge(
        f"ran too long, {_NO_RETRY_LEFT}", {_RUNNING}, _FAILED, EventKind.TIMED_OUT
    ),
    Edge.RELEASE: _edge("release", {_RUNNING}, _PENDING, EventKind.RELEASED),
    Edge.CANCEL: _edge("cancel", {_PENDING, _RUNNING}, _CANCELLED, EventKind.CANCELLED),
    Edge.RETRY: _edge("admin retry", {_FAILED, _CANCELLED}, _PENDING, EventKind.RETRIED),
    Edge.RUN_NOW: _edge("run now", {_PENDING}, _PENDING, EventKind.RUN_NOW),
}
