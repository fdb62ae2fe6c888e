"""Children: the worker holding a job's current attempt enqueues follow-up jobs for it. They are
the job's producer's jobs (its priority cap, its idempotency keys), marked with ``parent_id``,
and stored as a batch enqueue stores its items: all or nothing, a few statements in all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection

from app.queue.domain import batches, finishing, service
from app.queue.domain.errors import Forbidden
from app.queue.domain.models import Actor, EnqueueRequest, Job
from app.queue.domain.policy import Action, children_owner, holds, require
from app.queue.domain.visibility import visibility
from app.queue.engines import batches as store_batches
from app.queue.engines import children as store_children


def spawn(
    conn: Connection,
    actor: Actor,
    parent_id: int,
    attempt: int,
    requests: Sequence[EnqueueRequest],
    *,
    now: datetime,
) -> list[tuple[Job, bool]]:
    """Enqueue ``requests`` as children of job ``parent_id``, which ``actor`` must hold at
    ``attempt`` (else the refusal a finish by a non-holder gets: 404 unknown, 409 otherwise).
    The parent stays locked until the transaction ends, so it cannot finish or change hands
    between the check and the insert. ``(job, created)`` per request, as ``enqueue_many``."""
    actor = require(actor, Action.SPAWN)
    found = store_batches.jobs_by_ids(conn, {parent_id}, visibility(actor), locked=True)
    parent, _ = found.get(parent_id, (None, False))
    if parent is None or not holds(actor, parent, attempt):
        raise finishing.refusal(actor, parent_id, attempt, found)
    owner = store_children.producer(conn, parent.created_by)
    if owner is None:  # users are disabled, never deleted; kept for a hand-edited database
        raise Forbidden("the job's producer no longer exists")
    producer = children_owner(owner[0], disabled=owner[1])
    children = [replace(request, parent_id=parent.id) for request in requests]
    return batches.enqueue_many(conn, producer, children, now=now)


def children_of(conn: Connection, actor: Actor, job_id: int, *, limit: int) -> list[Job]:
    """Up to ``limit`` children of a job the actor may see, among those it may see, oldest
    first (the job page lists them)."""
    service.get_job(conn, actor, job_id)
    return store_children.children(conn, job_id, visibility(actor), limit)


def parent_of(conn: Connection, actor: Actor, job: Job) -> Job | None:
    """The job whose worker spawned ``job``, if ``actor`` may see it (a worker that claimed a
    child never held its parent: the page names the parent without linking it)."""
    if job.parent_id is None:
        return None
    parent, visible = store_batches.jobs_by_ids(conn, {job.parent_id}, visibility(actor)).get(
        job.parent_id, (None, False)
    )
    return parent if visible else None
