"""Retention as rules: how long finished jobs of each status (``RETENTION``) and audit rows
(``AUDIT_RETENTION``) are kept, counted from the job's finish (``finished_at``) or the audit
row's time; and one prune step, a bounded batch the caller runs in its own short transaction.
The SQL is in ``retention_sql``; the loop with its pauses in ``app.queue.usecases.housekeeping``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from app.queue.sql import retention as retention_sql
from app.queue.vocabulary.states import TERMINAL, JobStatus

DAY = 86_400
DEFAULT_RETENTION: dict[str, int | None] = {
    "completed": 14 * DAY,
    "cancelled": 14 * DAY,
    "failed": 30 * DAY,
}
DEFAULT_AUDIT_RETENTION = 365 * DAY
MAX_SECONDS = 100 * 365 * DAY  # a cutoff a century back is still a date
# How long one prune batch's deletes may hold the write lock (its commit costs what any write
# transaction's does): a claim waits about this much longer than behind another claim.
BATCH_SECONDS = 0.02
MIN_BATCH = 10
_RULE = f"seconds from 1 to {MAX_SECONDS:,}, or null to keep forever"
_EXAMPLE = '{"completed": 604800, "failed": null}'


def _seconds(value: object, where: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 1 <= value <= MAX_SECONDS:
        raise ValueError(f"{where} must be {_RULE}, not {value!r}")
    return value


@dataclass(frozen=True)
class Retention:
    """Seconds each finished status and the audit log are kept after their time (None:
    forever)."""

    jobs: Mapping[JobStatus, int | None] = field(
        default_factory=lambda: {JobStatus(k): v for k, v in DEFAULT_RETENTION.items()}
    )
    audit: int | None = DEFAULT_AUDIT_RETENTION

    @classmethod
    def from_config(cls, retention: object, audit: object) -> Retention:
        """``RETENTION`` (an object of finished status -> seconds, merged over the defaults)
        and ``AUDIT_RETENTION`` checked; ValueError names the setting and the rule."""
        if retention is None:
            retention = {}
        if not isinstance(retention, dict):
            raise ValueError(f"RETENTION must be an object of status -> seconds, e.g. {_EXAMPLE}")
        unknown = sorted(set(retention) - {str(s) for s in TERMINAL})
        if unknown:
            known = ", ".join(sorted(str(s) for s in TERMINAL))
            raise ValueError(
                f"RETENTION has unknown status(es) {', '.join(map(str, unknown))}; "
                f"only finished jobs are pruned: {known}"
            )
        merged = DEFAULT_RETENTION | retention
        jobs = {JobStatus(k): _seconds(v, f"RETENTION[{str(k)!r}]") for k, v in merged.items()}
        return cls(jobs=jobs, audit=_seconds(audit, "AUDIT_RETENTION"))

    def job_cutoffs(self, now: datetime) -> dict[JobStatus, datetime]:
        """Per status kept for a limited time: jobs that finished before this instant go."""
        return {
            status: now - timedelta(seconds=seconds)
            for status, seconds in sorted(self.jobs.items())
            if seconds is not None
        }

    def audit_cutoff(self, now: datetime) -> datetime | None:
        """Audit rows older than this instant go (None: kept forever)."""
        return None if self.audit is None else now - timedelta(seconds=self.audit)


@dataclass(frozen=True)
class Pruned:
    """What a prune removed: jobs per status, their events, audit rows."""

    jobs: Mapping[str, int] = field(default_factory=dict)
    events: int = 0
    audit_events: int = 0

    @property
    def job_total(self) -> int:
        return sum(self.jobs.values())

    @property
    def nothing(self) -> bool:
        return not (self.job_total or self.events or self.audit_events)

    def __add__(self, other: Pruned) -> Pruned:
        statuses = self.jobs.keys() | other.jobs.keys()
        return Pruned(
            {s: self.jobs.get(s, 0) + other.jobs.get(s, 0) for s in sorted(statuses)},
            self.events + other.events,
            self.audit_events + other.audit_events,
        )


def next_batch(size: int, took: float, *, largest: int) -> int:
    """The size of the next prune batch after one of ``size`` took ``took`` seconds: halved
    while batches hold the lock longer than ``BATCH_SECONDS`` (a loaded machine, slow disk),
    grown again while they take less than half of it; between ``MIN_BATCH`` and ``largest``."""
    if took > BATCH_SECONDS:
        size //= 2
    elif took < BATCH_SECONDS / 2:
        size *= 2
    return min(largest, max(MIN_BATCH, size))


def prune_jobs(conn: Connection, cutoffs: Mapping[JobStatus, datetime], batch: int) -> Pruned:
    """One step: up to ``batch`` jobs in all that finished before their status's cutoff, with
    their events, status by status, oldest first."""
    deleted: dict[str, int] = {}
    events = 0
    for status, cutoff in cutoffs.items():
        room = batch - sum(deleted.values())
        if room <= 0:
            break
        jobs, job_events = retention_sql.delete_old_jobs(conn, status, cutoff, room)
        if jobs:
            deleted[status.value] = jobs
        events += job_events
    return Pruned(deleted, events)


def anything_old(conn: Connection, retention: Retention, now: datetime) -> bool:
    """Whether a finished job is past its retention (a read: no write lock when none is)."""
    return retention_sql.any_old(conn, retention.job_cutoffs(now))


def record(conn: Connection, pruned: Pruned, *, at: datetime) -> None:
    """Keep ``pruned`` as what the latest prune removed (the admins' retention page)."""
    retention_sql.save_run(
        conn, at=at, jobs_deleted=pruned.jobs, events=pruned.events, audit=pruned.audit_events
    )


@dataclass(frozen=True)
class LastPrune:
    """The latest prune that removed something, as recorded."""

    at: datetime
    pruned: Pruned


def last_prune(conn: Connection) -> LastPrune | None:
    """What the latest prune removed (None: none has removed anything yet)."""
    row: Mapping[str, Any] | None = retention_sql.last_run(conn)
    if row is None:
        return None
    return LastPrune(row["at"], Pruned(dict(row["jobs"]), row["events"], row["audit_events"]))
