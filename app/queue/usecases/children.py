"""Children: the worker holding a job's current attempt enqueues follow-up jobs for it. They are
the job's producer's jobs (its priority cap), marked with ``parent_id``, and stored as a batch
enqueue stores its items: all or nothing, a few statements in all.

The worker acts as the producer only to create them: the children's idempotency and unique
keys live in the parent's namespace, their parents may be only the parent and its other
children, and the answer shows no other job as it is now (``as_enqueued``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy import Connection

from app.queue.rules.policy import holds, require_producer
from app.queue.rules.visibility import visibility
from app.queue.sql import batches as batches_sql
from app.queue.sql import children as children_sql
from app.queue.usecases import enqueueing, finishing, reading
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Changed
from app.queue.vocabulary.errors import Forbidden, InvalidInput
from app.queue.vocabulary.jobs import EnqueueRequest, Job
from app.queue.vocabulary.states import JobStatus


def spawn(
    conn: Connection,
    actor: Actor,
    parent_id: int,
    attempt: int,
    requests: Sequence[EnqueueRequest],
    *,
    now: datetime,
    max_children: int,
) -> Changed[list[tuple[Job, bool]]]:
    """Enqueue ``requests`` as children of job ``parent_id``, which ``actor`` must hold at
    ``attempt`` (else the refusal a finish by a non-holder gets: 404 unknown, 409 otherwise).
    The parent stays locked until the transaction ends, so it cannot finish or change hands
    between the check and the insert, and its children are counted exactly: a job has at
    most ``max_children`` in all, whichever attempts made them. ``(job, created)`` per
    request, as ``enqueue_many``, a job not created by this request shown ``as_enqueued``."""
    found = batches_sql.jobs_by_ids(conn, {parent_id}, visibility(actor), locked=True)
    parent, _ = found.get(parent_id, (None, False))
    if parent is None or not holds(actor, parent, attempt):
        raise finishing.refusal(actor, parent_id, attempt, found)
    owner = children_sql.producer(conn, parent.created_by)
    if owner is None:  # users are disabled, never deleted; kept for a hand-edited database
        raise Forbidden("the job's producer no longer exists")
    producer = owner.actor()
    require_producer(producer, disabled=owner.disabled)
    children = [replace(request, parent_id=parent.id) for request in requests]
    enqueued = enqueueing.enqueue_many(conn, producer, children, now=now)
    made = {job.id for job, created in enqueued.value if created}
    if made and (total := children_sql.count(conn, parent.id)) > max_children:
        had = total - len(made)
        message = f"a job may spawn at most {max_children} children; this one has {had}"
        raise InvalidInput({"jobs": message}, message)
    answered = [
        (job if job.id in made else as_enqueued(job, request), created)
        for request, (job, created) in zip(children, enqueued.value, strict=True)
    ]
    return Changed(answered, enqueued.effects)


def as_enqueued(job: Job, request: EnqueueRequest) -> Job:
    """A child that an earlier request made (an idempotent replay, or the active child of a
    unique key), as its enqueue made it: pending, waiting for the parents it named, never
    claimed. What happened to it since is the work of the workers that ran it (their names,
    progress, result), which the worker spawning it now may not see. The idempotent replay
    repeats its first request, so its ``run_at`` is the first one; a unique key's duplicate
    keeps its own."""
    run_at = job.run_at
    if request.idempotency_key is not None and job.idempotency_key == request.idempotency_key:
        delay = timedelta(seconds=request.delay_seconds or 0)
        run_at = request.run_at or job.created_at + delay
    return replace(
        job,
        status=JobStatus.PENDING,
        retry_count=0,
        attempts=0,
        run_at=run_at,
        claimed_at=None,
        lease_expires_at=None,
        lease_seconds=None,
        worker_id=None,
        progress=None,
        progress_message=None,
        result=None,
        error=None,
        updated_at=job.created_at,
        finished_at=None,
        deadline_at=None,
        waiting_for=job.depends_on,
    )


def children_of(conn: Connection, actor: Actor, job_id: int, *, limit: int) -> list[Job]:
    """Up to ``limit`` children of a job the actor may see, among those it may see, oldest
    first (the job page lists them)."""
    reading.get_job(conn, actor, job_id)
    return children_sql.children(conn, job_id, visibility(actor), limit)


def parent_of(conn: Connection, actor: Actor, job: Job) -> Job | None:
    """The job whose worker spawned ``job``, if ``actor`` may see it (a worker that claimed a
    child never held its parent: the page names the parent without linking it)."""
    if job.parent_id is None:
        return None
    parent, visible = batches_sql.jobs_by_ids(conn, {job.parent_id}, visibility(actor)).get(
        job.parent_id, (None, False)
    )
    return parent if visible else None
