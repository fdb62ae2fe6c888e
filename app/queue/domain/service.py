"""The job queue's use cases. The JSON API, the pages and the CLI all call these.

Rules of the house: permissions come from ``policy`` and are checked here (once per request);
every state change is a named transition (``transitions``) that writes its own event; the caller
owns the transaction (nothing here commits); the clock is the ``now`` argument.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from app.audit import hooks as audit
from app.audit.actions import AuditAction
from app.queue.domain import (
    finishing,
    flow_claim,
    listing,
    retention,
    transitions,
    uniqueness,
    workflow,
)
from app.queue.domain import polls as poll_notes
from app.queue.domain.errors import Conflict, Forbidden, InvalidInput, NotFound, QueueError
from app.queue.domain.models import (
    Actor,
    Beat,
    EnqueueRequest,
    Event,
    Job,
    JobFilters,
    JobPage,
    Outcome,
    QueueSettings,
)
from app.queue.domain.policy import Action, can, require
from app.queue.domain.polls import PollNotes
from app.queue.domain.retry import Uniform
from app.queue.domain.states import TERMINAL
from app.queue.domain.visibility import viewer, visibility
from app.queue.engines import batches as store_batches
from app.queue.engines import jobs as store
from app.queue.engines import moves as store_transitions

LEASE_EXPIRED = "lease expired"
_system_random = random.SystemRandom()


def enqueue(
    conn: Connection, actor: Actor, request: EnqueueRequest, *, now: datetime
) -> tuple[Job, bool]:
    """Add a job; returns ``(job, created)``. A repeated idempotency key returns the original;
    then a unique key returns its active job (``uniqueness``), and nothing is added. A new job
    with parents waits for them (``workflow``)."""
    job, created = enqueue_one(conn, actor, request, now=now)
    if created and request.depends_on:
        workflow.link(conn, actor, [workflow.Added(job, request)], [], now=now)
        job = store.get_job(conn, job.id) or job
    return job, created


def enqueue_one(
    conn: Connection, actor: Actor, request: EnqueueRequest, *, now: datetime
) -> tuple[Job, bool]:
    """``enqueue`` but for the parents, which the caller records (a batch, all at once)."""
    actor = require(actor, Action.ENQUEUE)
    admit(actor, request)
    if request.unique_key is not None:  # before any look, so concurrent enqueues take turns
        uniqueness.wait_for_turns(conn, actor.id, [request])
    if request.idempotency_key is not None:
        existing = store.find_by_idempotency_key(conn, actor.id, request.idempotency_key)
        if existing is not None:
            return replay(existing, request), False
    if request.unique_key is not None:
        active = uniqueness.active_job(conn, actor.id, request, now=now)
        if active is not None:
            return active, False
    job = store.insert_job(conn, new_job_row(actor, request, now=now), actor=actor.name)
    if job is None:  # a concurrent request with the same key won the insert
        assert request.idempotency_key is not None
        winner = store.find_by_idempotency_key(conn, actor.id, request.idempotency_key)
        if winner is None:
            raise Conflict("a concurrent request with this idempotency key did not finish")
        return replay(winner, request), False
    return job, True


def admit(actor: Actor, request: EnqueueRequest) -> None:
    """Refuse an enqueue above the caller's priority cap."""
    if request.priority > actor.priority_cap():
        raise Forbidden("priority is above your cap")


def new_job_row(actor: Actor, request: EnqueueRequest, *, now: datetime) -> dict[str, Any]:
    """The ``jobs`` row that enqueueing ``request`` adds."""
    return {
        "type": request.type,
        "payload": request.payload,
        "priority": request.priority,
        "max_retries": request.max_retries,
        "idempotency_key": request.idempotency_key,
        "request_fingerprint": request.fingerprint,
        "created_by": actor.id,
        "run_at": request.run_at or now + timedelta(seconds=request.delay_seconds or 0),
        "created_at": now,
        "updated_at": now,
        **({"unique_key": request.unique_key} if request.unique_key is not None else {}),
        **({"parent_id": request.parent_id} if request.parent_id is not None else {}),
        **(
            {"traceparent": request.trace.traceparent, "tracestate": request.trace.tracestate}
            if request.trace is not None
            else {}
        ),
        **_secret_columns(request),
    }


def _secret_columns(request: EnqueueRequest) -> dict[str, Any]:
    """The secret payload fields' columns, only when the request has some (so an enqueue
    without them keeps its INSERT)."""
    if not request.secret_names:
        return {}
    return {
        "secret_names": ",".join(request.secret_names),
        "secrets_sealed": request.sealed_secrets,
    }


def same_request(fingerprint: str | None, request: EnqueueRequest) -> None:
    """Refuse a repeated idempotency key whose first request (``fingerprint``) was another."""
    if fingerprint != request.fingerprint:
        raise InvalidInput(
            {"idempotency_key": "was already used with a different request"},
            "this idempotency key was already used with a different request",
        )


def replay(existing: Job, request: EnqueueRequest) -> Job:
    """The job a repeated idempotency key answers, if the request is the same."""
    same_request(existing.request_fingerprint, request)
    return existing


def get_job(conn: Connection, actor: Actor, job_id: int) -> Job:
    """A job the actor may see; NotFound for missing and invisible alike."""
    job = store.get_visible_job(conn, job_id, viewer(actor))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def list_jobs(conn: Connection, actor: Actor, filters: JobFilters) -> JobPage:
    """A page of the jobs the actor may see, in the filters' order, with keyset cursors."""
    return listing.page(conn, actor, filters)


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
    types: tuple[str, ...] | None = None,
    uniform: Uniform = _system_random.uniform,
    polls: PollNotes | None = None,
) -> Job | None:
    """Give the caller the next due job (of ``types``, when given), or None."""
    claimed = claim_many(
        conn,
        actor,
        now=now,
        settings=settings,
        max_jobs=1,
        lease_seconds=lease_seconds,
        types=types,
        uniform=uniform,
        polls=polls,
    )
    return claimed[0] if claimed else None


def claim_many(
    conn: Connection,
    actor: Actor,
    *,
    now: datetime,
    settings: QueueSettings,
    max_jobs: int,
    lease_seconds: int | None = None,
    types: tuple[str, ...] | None = None,
    uniform: Uniform = _system_random.uniform,
    polls: PollNotes | None = None,
) -> list[Job]:
    """Give the caller up to ``max_jobs`` due jobs (of ``types``, when given) in claim order,
    each with its own attempt and lease, recovering a batch of expired leases first. Paused
    types and types at their limits wait (``flow_claim``). Found or not, the types asked for
    are noted as polled (``polls``: this process's memory of its last notes)."""
    actor = require(actor, Action.WORK)
    recover_expired(conn, now=now, settings=settings, limit=settings.recover_batch, uniform=uniform)
    claimed = flow_claim.claim(
        conn,
        settings=settings,
        worker=actor.name,
        now=now,
        lease_seconds=lease_seconds or settings.default.lease_seconds,
        limit=max_jobs,
        types=types,
        type_leases=() if lease_seconds else settings.type_leases,
    )
    # After the claim's own writes: every claim takes its row locks in the same order.
    poll_notes.note(conn, polls, types or settings.job_types, now)
    return claimed


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
    for job in store_transitions.expired_leases(conn, now, limit):
        run_at = finishing.retry_at(job, now=now, settings=settings, retry_in=None, uniform=uniform)
        if transitions.lease_expired(conn, job, now=now, run_at=run_at, error=LEASE_EXPIRED):
            recovered += 1
    return recovered


def _only(answers: list[Job | QueueError]) -> Job:
    """The one report's job, or its refusal raised."""
    (answer,) = answers
    if isinstance(answer, QueueError):
        raise answer
    return answer


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
    actor = require(actor, Action.WORK)
    beat = Beat(job_id, attempt, progress, message)
    return _only(
        finishing.heartbeat(
            conn, actor, [beat], now=now, settings=settings, visible=visibility(actor)
        )
    )


def complete(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    result: dict[str, object] | None = None,
    attempt: int | None = None,
    settings: QueueSettings | None = None,
) -> Job:
    """Finish the caller's job successfully (``settings``: the backoff of an attempt that ran
    past its deadline, which is timed out instead)."""
    actor = require(actor, Action.WORK)
    outcome = Outcome(job_id, attempt, completed=True, result=result)
    return _only(
        finishing.finish(
            conn, actor, [outcome], now=now, settings=settings, visible=visibility(actor)
        )
    )


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
    actor = require(actor, Action.WORK)
    outcome = Outcome(
        job_id,
        attempt,
        completed=False,
        error=error,
        retry_in=retry_in,
        retryable=retryable,
    )
    return _only(
        finishing.finish(
            conn,
            actor,
            [outcome],
            now=now,
            settings=settings,
            visible=visibility(actor),
            uniform=uniform,
        )
    )


def release(conn: Connection, actor: Actor, job_id: int, *, now: datetime, attempt: int) -> Job:
    """Hand the caller's job back unstarted: pending again at once, no retry spent."""
    actor = require(actor, Action.WORK)
    done = transitions.release(conn, job_id, worker=actor.name, attempt=attempt, now=now)
    if done is None:
        found = store_batches.jobs_by_ids(conn, {job_id}, visibility(actor))
        raise finishing.refusal(actor, job_id, attempt, found)
    return done


def cancel(conn: Connection, actor: Actor, job_id: int, *, now: datetime) -> Job:
    """Cancel a job: producers their own pending jobs, admins any unfinished job."""
    actor = require(actor, Action.CANCEL)
    job = get_job(conn, actor, job_id)
    if not can(actor, Action.CANCEL, job):
        why = "finished" if job.status in TERMINAL else job.status
        raise Conflict(f"job {job_id} cannot be cancelled: it is {why}")
    done = transitions.cancel(conn, job, now=now, actor=actor.name)
    if done is None:
        raise Conflict(f"job {job_id} changed before it could be cancelled")
    audit.record(conn, AuditAction.JOB_CANCEL, f"job:{job_id}")
    return done


def retry(conn: Connection, actor: Actor, job_id: int, *, now: datetime) -> Job:
    """Admins: put a failed or cancelled job back in the queue with a fresh retry budget."""
    actor = require(actor, Action.RETRY)
    job = get_job(conn, actor, job_id)
    if not can(actor, Action.RETRY, job):
        raise Conflict(
            f"only failed or cancelled jobs can be retried; job {job_id} is {job.status}"
        )
    done = transitions.retry(conn, job, now=now, actor=actor.name)
    if done is None:
        raise Conflict(f"job {job_id} changed before it could be retried")
    audit.record(conn, AuditAction.JOB_RETRY, f"job:{job_id}")
    return done


def prune(conn: Connection, *, finished_before: datetime, batch: int) -> int:
    """Delete one batch of finished jobs (of any finished status) older than
    ``finished_before``, with their events; how many jobs went."""
    cutoffs = dict.fromkeys(sorted(TERMINAL), finished_before)
    return retention.prune_jobs(conn, cutoffs, batch).job_total
