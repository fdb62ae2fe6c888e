"""Job states, priorities and roles: the vocabulary shared by the API, the pages and the SQL."""

from __future__ import annotations

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
