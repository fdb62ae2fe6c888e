"""The batch use cases: the single-job use cases of ``service`` applied to many items in the
caller's one transaction (enqueue all or nothing; finish and heartbeat answered per item)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from app.queue.domain import finishing, service, uniqueness, workflow
from app.queue.domain.errors import InvalidInput, QueueError
from app.queue.domain.models import (
    Actor,
    Beat,
    EnqueueRequest,
    Job,
    Outcome,
    QueueSettings,
    parent_of,
)
from app.queue.domain.policy import Action, require
from app.queue.domain.visibility import visibility
from app.queue.engines import batches as store_batches


def _about_item(name: str, index: int, exc: QueueError) -> QueueError:
    """``exc`` raised by item ``index`` of the list ``name``, its fields and detail naming it."""
    where = f"{name}[{index}]"
    if isinstance(exc, InvalidInput):
        return InvalidInput({f"{where}.{key}": text for key, text in exc.errors.items()})
    return type(exc)(f"{where}: {exc.detail}")


def enqueue_many(
    conn: Connection,
    actor: Actor,
    requests: Sequence[EnqueueRequest],
    *,
    now: datetime,
    group: workflow.GroupRequest | None = None,
) -> list[tuple[Job, bool]]:
    """``enqueue_jobs``, then the workflow of the new jobs: they form ``group`` (when given),
    and each waits for the parents it names, jobs that existed before the request or earlier
    items (``workflow``). The jobs come back as they are after that."""
    actor = require(actor, Action.ENQUEUE)
    existing = workflow.existing_parents(conn, actor, requests)  # before the new jobs exist
    added = enqueue_jobs(conn, actor, requests, now=now)
    new = [(index, job) for index, (job, created) in enumerate(added) if created]
    if group is not None and new:
        workflow.form_group(conn, actor, group, [job for _, job in new], now=now)
    linked = [
        workflow.Added(job, requests[index], index)
        for index, job in new
        if requests[index].depends_on or requests[index].after_items
    ]
    if linked:
        workflow.link(conn, linked, [job.id for job, _ in added], existing, now=now)
    if not linked and group is None:
        return added
    fresh = store_batches.jobs_by_ids(conn, [job.id for _, job in new], None)
    return [(fresh[job.id][0] if created else job, created) for job, created in added]


def enqueue_jobs(
    conn: Connection, actor: Actor, requests: Sequence[EnqueueRequest], *, now: datetime
) -> list[tuple[Job, bool]]:
    """Enqueue every request in order, each as ``service.enqueue`` would (idempotency keys
    included); returns ``(job, created)`` per request. The first refused item raises, naming
    it (``jobs[3]``), and the caller's transaction rolls the others back.

    The rules are the single enqueue's; the SQL is batched: one lookup of the batch's keys (in
    the items' namespace, ``service.keyed_jobs``) and one insert of its new jobs. Should another
    transaction commit one of the keys meanwhile (the insert collides), the batch is redone
    item by item through ``service.enqueue``. So is a batch with unique keys: each such item
    looks for its active job after the ones before it."""
    actor = require(actor, Action.ENQUEUE)
    if any(request.unique_key is not None for request in requests):
        uniqueness.wait_for_turns(conn, actor.id, requests)  # every unique key, in one order
        return _one_by_one(conn, actor, requests, now=now)
    keys = {r.idempotency_key for r in requests if r.idempotency_key is not None}
    keyed = service.keyed_jobs(conn, actor, parent_of(requests), keys)
    stored = {job.idempotency_key: job for job in keyed}
    first_with: dict[str, int] = {}  # the new item a key came with first in this batch
    plan: list[Job | int] = []  # per item: the stored job it replays, or the new item it is
    fresh: list[int] = []  # the new items, in order
    for index, request in enumerate(requests):
        key = request.idempotency_key
        try:
            service.admit(actor, request)
            if key in stored:
                plan.append(service.replay(stored[key], request))
                continue
            if key is not None and key in first_with:
                service.same_request(requests[first_with[key]].fingerprint, request)
                plan.append(first_with[key])
                continue
        except QueueError as exc:
            raise _about_item("jobs", index, exc) from None
        if key is not None:
            first_with[key] = index
        plan.append(index)
        fresh.append(index)
    rows = [service.new_job_row(actor, requests[index], now=now) for index in fresh]
    if not first_with:  # no idempotency key: nothing to collide on, no savepoint needed
        inserted = store_batches.insert_jobs(conn, rows, actor=actor.name)
        new = dict(zip(fresh, inserted, strict=True))
    else:
        try:
            with conn.begin_nested():
                inserted = store_batches.insert_jobs(conn, rows, actor=actor.name)
                new = dict(zip(fresh, inserted, strict=True))
        except IntegrityError:
            return _one_by_one(conn, actor, requests, now=now)
    return [
        (step, False) if isinstance(step, Job) else (new[step], step == index)
        for index, step in enumerate(plan)
    ]


def _one_by_one(
    conn: Connection, actor: Actor, requests: Sequence[EnqueueRequest], *, now: datetime
) -> list[tuple[Job, bool]]:
    """Every request through the single enqueue, naming the first refused item."""
    added = []
    for index, request in enumerate(requests):
        try:
            added.append(service.enqueue_one(conn, actor, request, now=now))
        except QueueError as exc:
            raise _about_item("jobs", index, exc) from None
    return added


def finish(
    conn: Connection,
    actor: Actor,
    outcomes: Sequence[Outcome],
    *,
    now: datetime,
    settings: QueueSettings,
) -> list[Job | QueueError]:
    """Apply each outcome as the single complete or fail route would; per outcome, the job it
    left or the refusal (a refused item changes nothing, the others still apply)."""
    actor = require(actor, Action.WORK)
    visible = visibility(actor)
    return finishing.finish(conn, actor, outcomes, now=now, settings=settings, visible=visible)


def heartbeat_many(
    conn: Connection,
    actor: Actor,
    beats: Sequence[Beat],
    *,
    now: datetime,
    settings: QueueSettings,
) -> list[Job | QueueError]:
    """Apply each heartbeat as the single heartbeat route would; per beat, the job with its
    extended lease or the refusal (a cancelled job's refusal says so)."""
    actor = require(actor, Action.WORK)
    visible = visibility(actor)
    return finishing.heartbeat(conn, actor, beats, now=now, settings=settings, visible=visible)
