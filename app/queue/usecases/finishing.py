"""Workers' reports on the jobs they hold: finish (complete or fail) and heartbeat any number of
jobs in a bounded number of statements (one read, one compare-and-set per edge, one insert of
the events, and one more read only to explain a report that lost a race). The single-job routes
are the one-report case of the same code.

Each report is decided from the job as read: whether the caller holds it (at the attempt it
names), and for a failure whether a retry is left and when. The compare-and-set then refuses a
job that changed since the read, so a lost race still changes nothing.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from app.queue.rules import edges
from app.queue.rules.backoff import Uniform, backoff_seconds
from app.queue.rules.policy import holds
from app.queue.rules.sanitize import sanitize_error
from app.queue.rules.settings import QueueSettings
from app.queue.rules.visibility import visibility
from app.queue.sql import batches as batches_sql
from app.queue.sql import edges as edges_sql
from app.queue.sql.items import Columns, Kind
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Changed
from app.queue.vocabulary.errors import (
    AttemptTimedOut,
    Conflict,
    InvalidInput,
    NotFound,
    QueueError,
)
from app.queue.vocabulary.jobs import Beat, Job, Outcome
from app.queue.vocabulary.states import Edge, JobStatus
from app.queue.vocabulary.timeutil import iso

MAX_MESSAGE_BYTES = 500  # the progress_message column
NOT_RETRYABLE = "worker marked the failure as not retryable"
TIMED_OUT = "ran past its deadline (max_run_seconds)"  # the error of a timed-out attempt
# The fields of a failed outcome; a completed one carries only ``result``.
_FAILURE_FIELDS = ("error", "retry_in", "retryable")
_system_random = random.SystemRandom()
Found = Mapping[int, tuple[Job, bool]]  # jobs by id, each with whether the caller may see it


def retry_at(
    job: Job, *, now: datetime, settings: QueueSettings, retry_in: float | None, uniform: Uniform
) -> datetime | None:
    """When a failed attempt of ``job`` may run again (None: no retry left)."""
    if job.retry_count >= job.max_retries:
        return None
    if retry_in is None:
        timing = settings.for_type(job.type)
        retry_in = backoff_seconds(
            job.retry_count + 1,
            base=timing.backoff_base_seconds,
            cap=timing.backoff_cap_seconds,
            uniform=uniform,
        )
    return now + timedelta(seconds=retry_in)


def refusal(actor: Actor, job_id: int, attempt: int | None, found: Found) -> QueueError:
    """Why a worker's report on a job it does not hold was refused: 404 for an id that does not
    exist, 409 otherwise. A job the caller cannot see answers without its state."""
    job, visible = found.get(job_id, (None, False))
    if job is None:
        return NotFound(f"job {job_id} does not exist")
    if not visible:
        return Conflict(f"job {job_id} is not held by you")
    if job.status == JobStatus.CANCELLED:
        return Conflict(f"job {job_id} was cancelled; stop working on it")
    if job.status != JobStatus.RUNNING or job.worker_id != actor.name:
        return Conflict(f"job {job_id} is not held by you (it is {job.status})")
    if attempt is not None and attempt != job.attempts:
        return Conflict(f"attempt {attempt} is stale; the job is on attempt {job.attempts}")
    return Conflict(f"job {job_id} changed meanwhile; try again")


def _mismatch(outcome: Outcome) -> InvalidInput | None:
    """Why an outcome's fields do not fit its verdict, if they do not."""
    if outcome.completed:
        extra = [name for name in _FAILURE_FIELDS if getattr(outcome, name) is not None]
        if extra:
            return InvalidInput({name: "goes with a failed outcome" for name in extra})
        return None
    if outcome.error is None:
        return InvalidInput({"error": "is required for a failed outcome"})
    if outcome.result is not None:
        return InvalidInput({"result": "goes with a completed outcome"})
    return None


def _report(
    job: Job, outcome: Outcome, *, now: datetime, settings: QueueSettings | None, uniform: Uniform
) -> edges.Report:
    """The edge a held job takes for ``outcome``, with its values."""
    if outcome.completed:
        return edges.Report(Edge.COMPLETE, job.id, job.attempts, result=outcome.result)
    assert outcome.error is not None  # _mismatch refused a failure without one
    if settings is None:
        raise ValueError("a failure needs the queue settings (its error limit and backoff)")
    error = sanitize_error(outcome.error, settings.max_error_bytes)
    retryable = outcome.retryable is not False
    run_at = None
    if retryable:
        run_at = retry_at(
            job, now=now, settings=settings, retry_in=outcome.retry_in, uniform=uniform
        )
    if run_at is None:
        note = None if retryable else NOT_RETRYABLE
        return edges.Report(
            Edge.FAIL_FOR_GOOD,
            job.id,
            job.attempts,
            error=error,
            note=note,
            retry_count=job.retry_count,
        )
    return edges.Report(
        Edge.FAIL_WITH_RETRY,
        job.id,
        job.attempts,
        error=error,
        retry_count=job.retry_count,
        run_at=run_at,
    )


def _answers(
    conn: Connection,
    actor: Actor,
    asked: Sequence[tuple[int, int | None]],
    moved: Mapping[int, Job],
    refused: dict[int, QueueError],
    repeats: Collection[int] = (),
) -> list[Job | QueueError]:
    """Per report (``(job id, attempt)`` in ``asked``): its moved job, or why it was refused
    (``refused`` holds those refused before any read). Reports that did not move their job
    (not held, a race since the read, a repeat of an earlier report of the same job) are
    explained by one more read, as the job is now, with whether the caller may see it (the
    rule is built for that read only: building it was a tenth of a finish of two jobs, in its
    write transaction)."""
    lost = [
        index
        for index, (job_id, _) in enumerate(asked)
        if index not in refused and (job_id not in moved or index in repeats)
    ]
    if lost:
        ids = {asked[i][0] for i in lost}
        found = batches_sql.jobs_by_ids(conn, ids, visibility(actor))
        refused |= {i: refusal(actor, asked[i][0], asked[i][1], found) for i in lost}
    return [refused.get(i) or moved[job_id] for i, (job_id, _) in enumerate(asked)]


def finish(
    conn: Connection,
    actor: Actor,
    outcomes: Sequence[Outcome],
    *,
    now: datetime,
    settings: QueueSettings | None,
    uniform: Uniform = _system_random.uniform,
) -> Changed[list[Job | QueueError]]:
    """Apply each outcome of a job the caller holds; per outcome, the job it left or the
    refusal (a refused item changes nothing; the others still apply). A job named twice is
    finished by its first outcome; the second is refused as the job is then. ``settings`` may be
    None when every outcome is a completion and no attempt ran past its deadline. A report of
    an attempt past its deadline is refused (``AttemptTimedOut``) and the attempt timed out."""
    if not outcomes:  # a finish that only claims
        return Changed([])
    found = batches_sql.jobs_by_ids(conn, {o.job_id for o in outcomes}, None)
    refused: dict[int, QueueError] = {}
    reports: dict[int, edges.Report] = {}
    reported_by: dict[int, int] = {}  # job id -> the outcome that reports it
    late: dict[int, Job] = {}
    for index, outcome in enumerate(outcomes):
        job, _ = found.get(outcome.job_id, (None, False))
        if (mismatch := _mismatch(outcome)) is not None:
            refused[index] = mismatch
        elif outcome.job_id in reports or outcome.job_id in late:
            continue  # a repeat: answered as the job is after the first report moved it
        elif job is not None and holds(actor, job, outcome.attempt):
            # (not held: no report, and the answer explains why)
            if overdue(job, now):
                late[job.id] = job
                refused[index] = _timed_out(job)
            else:
                reports[job.id] = _report(job, outcome, now=now, settings=settings, uniform=uniform)
            reported_by[job.id] = index
    timed_out = time_out(conn, late.values(), now=now, settings=settings, uniform=uniform)
    moved = edges.finish_many(conn, list(reports.values()), worker=actor.name, now=now)
    asked = [(o.job_id, o.attempt) for o in outcomes]
    repeats = {i for i, (job_id, _) in enumerate(asked) if reported_by.get(job_id, i) != i}
    answers = _answers(conn, actor, asked, moved.value, refused, repeats)
    return Changed(answers, timed_out.effects | moved.effects)


def heartbeat(
    conn: Connection,
    actor: Actor,
    beats: Sequence[Beat],
    *,
    now: datetime,
    settings: QueueSettings,
    uniform: Uniform = _system_random.uniform,
) -> Changed[list[Job | QueueError]]:
    """Extend the lease of each job the caller holds by the length it was claimed with and
    record its progress; per beat, the job or the refusal (a cancelled job's says so). An
    attempt past its deadline is timed out and its beats refused (``AttemptTimedOut``)."""
    found = batches_sql.jobs_by_ids(conn, {beat.job_id for beat in beats}, None)
    leases: dict[int, dict[str, Any]] = {}
    late: dict[int, Job] = {}
    refused: dict[int, QueueError] = {}
    for index, beat in enumerate(beats):
        job, _ = found.get(beat.job_id, (None, False))
        if job is None or not holds(actor, job, beat.attempt):
            continue  # not held: the answer explains why
        if overdue(job, now):
            late[job.id] = job
            refused[index] = _timed_out(job)
            continue
        lease = job.lease_seconds or settings.for_type(job.type).lease_seconds
        message = job.progress_message
        if beat.message is not None:  # people read it on the job page: no secrets, like errors
            message = sanitize_error(beat.message, MAX_MESSAGE_BYTES)
        leases[job.id] = {  # a repeated beat of a job: the last one counts
            "job_id": job.id,
            "attempt": job.attempts,
            "lease_expires_at": now + timedelta(seconds=lease),
            "progress": job.progress if beat.progress is None else beat.progress,
            "progress_message": message,
        }
    timed_out = time_out(conn, late.values(), now=now, settings=settings, uniform=uniform)
    moved, _ = batches_sql.move_many(
        conn,
        list(leases.values()),
        sources=frozenset({JobStatus.RUNNING}),
        worker=actor.name,
        shared={},
        columns=_LEASE,
        at=now,
    )
    asked = [(b.job_id, b.attempt) for b in beats]
    return Changed(_answers(conn, actor, asked, moved, refused), timed_out.effects)


# What a heartbeat moves on (running stays running, no event).
_LEASE: Columns = (
    ("lease_expires_at", Kind.TIMESTAMP),
    ("progress", Kind.INTEGER),
    ("progress_message", Kind.TEXT),
)


def overdue(job: Job, now: datetime) -> bool:
    """Whether ``job``'s running attempt is past its deadline (its type's max_run_seconds)."""
    return job.deadline_at is not None and job.deadline_at <= now


def _timed_out(job: Job) -> AttemptTimedOut:
    return AttemptTimedOut(
        f"attempt {job.attempts} is stale: it ran past its deadline ({iso(job.deadline_at)}, "
        "the type's max_run_seconds) and was failed"
    )


def time_out(
    conn: Connection,
    late: Collection[Job],
    *,
    now: datetime,
    settings: QueueSettings | None,
    uniform: Uniform = _system_random.uniform,
) -> Changed[dict[int, Job]]:
    """Fail the running attempts of ``late`` (past their deadlines) as the retry policy says:
    pending again after backoff while retries remain, else failed; each with a ``timed_out``
    event. One statement per edge for all of them. The jobs that moved, by id."""
    if not late:
        return Changed({})
    if settings is None:
        raise ValueError("a time-out needs the queue settings (its backoff)")
    reports = []
    for job in late:
        run_at = retry_at(job, now=now, settings=settings, retry_in=None, uniform=uniform)
        edge = Edge.TIMED_OUT_FOR_GOOD if run_at is None else Edge.TIMED_OUT_WITH_RETRY
        reports.append(
            edges.Report(
                edge,
                job.id,
                job.attempts,
                error=TIMED_OUT,
                note=f"attempt of {job.worker_id} ran past its deadline",
                retry_count=job.retry_count,
                run_at=run_at,
            )
        )
    return edges.finish_many(conn, reports, worker=None, now=now)


def any_overdue(conn: Connection, now: datetime) -> bool:
    """Whether a running attempt is past its deadline (a read of the running jobs' index)."""
    return edges_sql.any_overdue(conn, now)


def sweep_overdue(
    conn: Connection,
    *,
    now: datetime,
    settings: QueueSettings,
    limit: int,
    uniform: Uniform = _system_random.uniform,
) -> Changed[int]:
    """Housekeeping: time out up to ``limit`` running attempts past their deadlines, whoever
    holds them (the rest heartbeat and report on time, or a later sweep takes them): how many
    moved."""
    late = edges_sql.overdue_attempts(conn, now, limit)
    timed_out = time_out(conn, late, now=now, settings=settings, uniform=uniform)
    return Changed(len(timed_out.value), timed_out.effects)
