"""The job queue's use cases. The JSON API, the pages and the CLI all call these.

Rules of the house: roles and visibility are checked here and nowhere else; every transition
is a compare-and-set in ``store`` followed by an event row; the caller owns the transaction
(nothing here commits); the clock is the ``now`` argument.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import ColumnElement, Connection

from app.queue import store
from app.queue.cursors import encode_cursor
from app.queue.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.queue.models import Actor, EnqueueRequest, Event, Job, JobFilters, JobPage, QueueSettings
from app.queue.retry import Uniform, backoff_seconds
from app.queue.sanitize import sanitize_error
from app.queue.states import RETRYABLE, TERMINAL, JobStatus, Role

LEASE_EXPIRED = "lease expired"
MAX_MESSAGE_BYTES = 500  # the progress_message column
_system_random = random.SystemRandom()


class Action(StrEnum):
    """What a caller wants to do to jobs; ``PERMISSIONS`` says which roles may."""

    ENQUEUE = "enqueue"
    WORK = "claim, heartbeat, complete or fail"
    CANCEL = "cancel"
    RETRY = "retry"


PERMISSIONS: dict[Action, frozenset[Role]] = {
    Action.ENQUEUE: frozenset({Role.PRODUCER, Role.ADMIN}),
    Action.WORK: frozenset({Role.WORKER, Role.ADMIN}),
    Action.CANCEL: frozenset({Role.PRODUCER, Role.ADMIN}),
    Action.RETRY: frozenset({Role.ADMIN}),
}


def authorize(actor: Actor, action: Action) -> None:
    """Refuse (403) an action the actor's role does not allow."""
    if actor.role not in PERMISSIONS[action]:
        raise Forbidden(f"the {actor.role} role may not {action} jobs")


def visibility(actor: Actor) -> ColumnElement[bool] | None:
    """The condition selecting the jobs ``actor`` may see (None: all of them)."""
    if actor.role is Role.ADMIN:
        return None
    if actor.role is Role.WORKER:
        return store.visible_to_worker(actor.name)
    return store.visible_to_owner(actor.id)


def enqueue(
    conn: Connection, actor: Actor, request: EnqueueRequest, *, now: datetime
) -> tuple[Job, bool]:
    """Add a job; returns ``(job, created)``. A repeated idempotency key returns the original."""
    authorize(actor, Action.ENQUEUE)
    if request.priority > actor.priority_cap():
        raise Forbidden("priority is above your cap")
    if request.idempotency_key is not None:
        existing = store.find_by_idempotency_key(conn, actor.id, request.idempotency_key)
        if existing is not None:
            return _same_request(existing, request), False
    run_at = request.run_at or now + timedelta(seconds=request.delay_seconds or 0)
    job = store.insert_job(
        conn,
        {
            "type": request.type,
            "payload": request.payload,
            "priority": request.priority,
            "max_retries": request.max_retries,
            "idempotency_key": request.idempotency_key,
            "request_fingerprint": request.fingerprint if request.idempotency_key else None,
            "created_by": actor.id,
            "run_at": run_at,
            "created_at": now,
            "updated_at": now,
        },
    )
    if job is None:  # a concurrent request with the same key won the insert
        assert request.idempotency_key is not None
        winner = store.find_by_idempotency_key(conn, actor.id, request.idempotency_key)
        if winner is None:
            raise Conflict("a concurrent request with this idempotency key did not finish")
        return _same_request(winner, request), False
    store.record_event(conn, job=job, at=now, from_status=None, kind="enqueued", actor=actor.name)
    return job, True


def _same_request(existing: Job, request: EnqueueRequest) -> Job:
    if existing.request_fingerprint != request.fingerprint:
        raise InvalidInput(
            {"idempotency_key": "was already used with a different request"},
            "this idempotency key was already used with a different request",
        )
    return existing


def get_job(conn: Connection, actor: Actor, job_id: int) -> Job:
    """A job the actor may see; NotFound for missing and invisible alike."""
    job = store.get_job(conn, job_id, visibility(actor))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def list_jobs(conn: Connection, actor: Actor, filters: JobFilters) -> JobPage:
    """A page of the jobs the actor may see, newest first, with keyset cursors."""
    found, more = store.list_jobs(conn, filters, visibility(actor))
    going_newer = filters.after_id is not None
    next_cursor = prev_cursor = None
    if found and (more or going_newer):
        next_cursor = encode_cursor("before", found[-1].id)
    if found and (filters.before_id is not None or (going_newer and more)):
        prev_cursor = encode_cursor("after", found[0].id)
    return JobPage(jobs=found, next_cursor=next_cursor, prev_cursor=prev_cursor)


def list_events(conn: Connection, actor: Actor, job_id: int) -> list[Event]:
    """A visible job's history, oldest first."""
    get_job(conn, actor, job_id)
    return store.list_events(conn, job_id)


def claim(
    conn: Connection,
    actor: Actor,
    *,
    now: datetime,
    settings: QueueSettings,
    lease_seconds: int | None = None,
    uniform: Uniform = _system_random.uniform,
) -> Job | None:
    """Give the caller the next due job, recovering a batch of expired leases first."""
    authorize(actor, Action.WORK)
    recover_expired(conn, now=now, settings=settings, limit=settings.recover_batch, uniform=uniform)
    job = store.claim_next(
        conn,
        worker=actor.name,
        now=now,
        lease_seconds=lease_seconds or settings.default.lease_seconds,
        type_leases=() if lease_seconds else settings.type_leases,
    )
    if job is not None:
        store.record_event(
            conn, job=job, at=now, from_status=JobStatus.PENDING, kind="claimed", actor=actor.name
        )
    return job


def recover_expired(
    conn: Connection,
    *,
    now: datetime,
    settings: QueueSettings,
    limit: int,
    uniform: Uniform = _system_random.uniform,
) -> int:
    """Turn expired leases into failed attempts; returns how many jobs were recovered."""
    recovered = 0
    for job in store.expired_leases(conn, now, limit):
        error = LEASE_EXPIRED
        done = _after_failure(
            conn,
            job,
            now=now,
            settings=settings,
            error=error,
            retry_in=None,
            retryable=True,
            uniform=uniform,
            extra=[store.lease_expired_before(now)],
        )
        if done is not None:
            store.record_event(
                conn,
                job=done,
                at=now,
                from_status=JobStatus.RUNNING,
                kind="lease_expired",
                actor=None,
                error=error,
                note=f"lease of {job.worker_id} expired",
            )
            recovered += 1
    return recovered


def _after_failure(
    conn: Connection,
    job: Job,
    *,
    now: datetime,
    settings: QueueSettings,
    error: str,
    retry_in: float | None,
    retryable: bool,
    uniform: Uniform,
    extra: list[ColumnElement[bool]],
) -> Job | None:
    """CAS a running job to pending (with backoff) or failed; None if it changed meanwhile."""
    expect = {"attempts": job.attempts, "retry_count": job.retry_count, "worker_id": job.worker_id}
    if retryable and job.retry_count < job.max_retries:
        retry = job.retry_count + 1
        if retry_in is None:
            policy = settings.for_type(job.type)
            retry_in = backoff_seconds(
                retry,
                base=policy.backoff_base_seconds,
                cap=policy.backoff_cap_seconds,
                uniform=uniform,
            )
        values = {
            "status": JobStatus.PENDING,
            "retry_count": retry,
            "run_at": now + timedelta(seconds=retry_in),
        }
    else:
        values = {"status": JobStatus.FAILED, "finished_at": now}
    values |= {
        "worker_id": None,
        "claimed_at": None,
        "lease_expires_at": None,
        "error": error,
        "updated_at": now,
    }
    return store.transition(
        conn, job.id, expect=expect, statuses=[JobStatus.RUNNING], values=values, extra=extra
    )


def _held_job(conn: Connection, actor: Actor, job_id: int, attempt: int | None) -> Job:
    """The running job the caller holds (at ``attempt`` if given), else 404 or 409 saying why."""
    authorize(actor, Action.WORK)
    job = store.get_job(conn, job_id)
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    if job.status == JobStatus.CANCELLED:
        raise Conflict(f"job {job_id} was cancelled; stop working on it")
    if job.status != JobStatus.RUNNING or job.worker_id != actor.name:
        raise Conflict(f"job {job_id} is not held by you (it is {job.status})")
    if attempt is not None and attempt != job.attempts:
        raise Conflict(f"attempt {attempt} is stale; the job is on attempt {job.attempts}")
    return job


def _lost_race(conn: Connection, actor: Actor, job_id: int, attempt: int | None) -> Conflict:
    """The 409 for a compare-and-set that lost: re-read the job to say why (e.g. cancelled)."""
    _held_job(conn, actor, job_id, attempt)  # raises the precise reason when there is one
    return Conflict(f"job {job_id} changed meanwhile; try again")


def _holder_expectation(job: Job) -> dict[str, object]:
    return {"worker_id": job.worker_id, "attempts": job.attempts}


def heartbeat(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    settings: QueueSettings,
    progress: int | None = None,
    message: str | None = None,
    attempt: int | None = None,
) -> Job:
    """Extend the caller's lease by the length it was claimed with, and record progress."""
    job = _held_job(conn, actor, job_id, attempt)
    lease = job.lease_seconds or settings.for_type(job.type).lease_seconds
    values: dict[str, object] = {
        "lease_expires_at": now + timedelta(seconds=lease),
        "updated_at": now,
    }
    if progress is not None:
        values["progress"] = progress
    if message is not None:  # people read it on the job page: no secrets, like errors
        values["progress_message"] = sanitize_error(message, MAX_MESSAGE_BYTES)
    updated = store.transition(
        conn, job.id, expect=_holder_expectation(job), statuses=[JobStatus.RUNNING], values=values
    )
    if updated is None:
        raise _lost_race(conn, actor, job_id, attempt)
    return updated


def complete(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    result: dict[str, object] | None = None,
    attempt: int | None = None,
) -> Job:
    """Finish the caller's job successfully."""
    job = _held_job(conn, actor, job_id, attempt)
    done = store.transition(
        conn,
        job.id,
        expect=_holder_expectation(job),
        statuses=[JobStatus.RUNNING],
        values={
            "status": JobStatus.COMPLETED,
            "result": result,
            "progress": 100,
            "lease_expires_at": None,
            "finished_at": now,
            "updated_at": now,
        },
    )
    if done is None:
        raise _lost_race(conn, actor, job_id, attempt)
    store.record_event(
        conn, job=done, at=now, from_status=JobStatus.RUNNING, kind="completed", actor=actor.name
    )
    return done


def fail(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    settings: QueueSettings,
    error: str,
    attempt: int | None = None,
    retry_in: float | None = None,
    retryable: bool = True,
    uniform: Uniform = _system_random.uniform,
) -> Job:
    """Record a failed attempt: back to pending after backoff while retries remain, else failed."""
    job = _held_job(conn, actor, job_id, attempt)
    clean = sanitize_error(error, settings.max_error_bytes)
    done = _after_failure(
        conn,
        job,
        now=now,
        settings=settings,
        error=clean,
        retry_in=retry_in,
        retryable=retryable,
        uniform=uniform,
        extra=[],
    )
    if done is None:
        raise _lost_race(conn, actor, job_id, attempt)
    kind = "retry_scheduled" if done.status == JobStatus.PENDING else "failed"
    store.record_event(
        conn,
        job=done,
        at=now,
        from_status=JobStatus.RUNNING,
        kind=kind,
        actor=actor.name,
        error=clean,
        note=None if retryable else "worker marked the failure as not retryable",
    )
    return done


def may_cancel(actor: Actor, job: Job) -> bool:
    """Whether ``cancel`` would accept this visible job from this actor (for offering it)."""
    cancellable = (JobStatus.PENDING, JobStatus.RUNNING) if actor.is_admin else (JobStatus.PENDING,)
    return actor.role in PERMISSIONS[Action.CANCEL] and job.status in cancellable


def may_retry(actor: Actor, job: Job) -> bool:
    """Whether ``retry`` would accept this job from this actor (for offering it)."""
    return actor.role in PERMISSIONS[Action.RETRY] and job.status in RETRYABLE


def cancel(conn: Connection, actor: Actor, job_id: int, *, now: datetime) -> Job:
    """Cancel a job: producers their own pending jobs, admins any unfinished job."""
    authorize(actor, Action.CANCEL)
    job = get_job(conn, actor, job_id)
    if not may_cancel(actor, job):
        why = "finished" if job.status in TERMINAL else job.status
        raise Conflict(f"job {job_id} cannot be cancelled: it is {why}")
    done = store.transition(
        conn,
        job.id,
        expect={"attempts": job.attempts},
        statuses=[job.status],  # the status the event will name as "from"
        values={
            "status": JobStatus.CANCELLED,
            "lease_expires_at": None,
            "finished_at": now,
            "updated_at": now,
        },
    )
    if done is None:
        raise Conflict(f"job {job_id} changed before it could be cancelled")
    store.record_event(
        conn, job=done, at=now, from_status=job.status, kind="cancelled", actor=actor.name
    )
    return done


def retry(conn: Connection, actor: Actor, job_id: int, *, now: datetime) -> Job:
    """Admins: put a failed or cancelled job back in the queue with a fresh retry budget."""
    authorize(actor, Action.RETRY)
    job = get_job(conn, actor, job_id)
    if not may_retry(actor, job):
        raise Conflict(
            f"only failed or cancelled jobs can be retried; job {job_id} is {job.status}"
        )
    done = store.transition(
        conn,
        job.id,
        expect={"attempts": job.attempts},
        statuses=[job.status],  # the status the event will name as "from"
        values={
            "status": JobStatus.PENDING,
            "retry_count": 0,
            "run_at": now,
            "worker_id": None,
            "claimed_at": None,
            "lease_expires_at": None,
            "progress": None,
            "progress_message": None,
            "finished_at": None,
            "updated_at": now,
        },
    )
    if done is None:
        raise Conflict(f"job {job_id} changed before it could be retried")
    store.record_event(
        conn, job=done, at=now, from_status=job.status, kind="retried", actor=actor.name
    )
    return done


def prune(conn: Connection, *, finished_before: datetime, batch: int) -> int:
    """Delete one batch of finished jobs older than ``finished_before``."""
    return store.prune_batch(conn, finished_before, batch)
