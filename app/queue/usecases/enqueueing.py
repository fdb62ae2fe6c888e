"""Enqueueing: one job or a batch (all or nothing), with its idempotency key, its unique key and
its parents; the caller owns the transaction."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from app.queue.rules import uniqueness, workflows
from app.queue.rules.policy import priority_cap
from app.queue.sql import batches as batches_sql
from app.queue.sql import children as children_sql
from app.queue.sql import jobs as jobs_sql
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import NOTHING, Changed, Effects
from app.queue.vocabulary.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    QueueError,
)
from app.queue.vocabulary.jobs import EnqueueRequest, Job, parent_of


def enqueue(
    conn: Connection, actor: Actor, request: EnqueueRequest, *, now: datetime
) -> Changed[tuple[Job, bool]]:
    """Add a job; returns ``(job, created)``. A repeated idempotency key returns the original;
    then a unique key returns its active job (``uniqueness``), and nothing is added. A new job
    with parents waits for them (``workflows``): jobs that existed before it."""
    existing = workflows.existing_parents(conn, actor, [request])  # before the job exists
    job, created = enqueue_one(conn, actor, request, now=now)
    if not created:
        return Changed((job, False))
    linked = NOTHING
    if request.depends_on:
        linked = workflows.link(conn, [workflows.Added(job, request)], [], existing, now=now)
        job = jobs_sql.get_job(conn, job.id) or job
    return Changed((job, True), Effects.of([job], now) | linked)


def enqueue_one(
    conn: Connection, actor: Actor, request: EnqueueRequest, *, now: datetime
) -> tuple[Job, bool]:
    """``enqueue`` but for the parents, which the caller records (a batch, all at once)."""
    admit(actor, request)
    if request.unique_key is not None:  # before any look, so concurrent enqueues take turns
        uniqueness.wait_for_turns(conn, actor.id, [request])
    if request.idempotency_key is not None:
        existing = _keyed(conn, actor, request)
        if existing is not None:
            return replay(existing, request), False
    if request.unique_key is not None:
        active = uniqueness.active_job(conn, actor.id, request, now=now)
        if active is not None:
            return active, False
    job = jobs_sql.insert_job(conn, new_job_row(actor, request, now=now), actor=actor.name)
    if job is None:  # a concurrent request with the same key won the insert
        winner = _keyed(conn, actor, request)
        if winner is None:
            raise Conflict("a concurrent request with this idempotency key did not finish")
        return replay(winner, request), False
    return job, True


def keyed_jobs(
    conn: Connection, actor: Actor, parent_id: int | None, keys: Collection[str]
) -> list[Job]:
    """The jobs enqueued with any of ``keys`` in their namespace: the actor's own jobs, or
    with ``parent_id`` that job's children (whose keys never meet their producer's)."""
    if parent_id is None:
        return batches_sql.jobs_by_idempotency_keys(conn, actor.id, keys)
    return children_sql.keyed_children(conn, parent_id, keys)


def _keyed(conn: Connection, actor: Actor, request: EnqueueRequest) -> Job | None:
    """The job enqueued with the request's idempotency key in its namespace, if any."""
    assert request.idempotency_key is not None
    if request.parent_id is None:  # the hot single enqueue: its own prepared lookup
        return jobs_sql.find_by_idempotency_key(conn, actor.id, request.idempotency_key)
    return next(iter(keyed_jobs(conn, actor, request.parent_id, [request.idempotency_key])), None)


def admit(actor: Actor, request: EnqueueRequest) -> None:
    """Refuse an enqueue above the caller's priority cap."""
    if request.priority > priority_cap(actor):
        raise Forbidden("priority is above your cap")


def new_job_row(actor: Actor, request: EnqueueRequest, *, now: datetime) -> dict[str, Any]:
    """The ``jobs`` row that enqueueing ``request`` adds."""
    return {
        "type": request.type,
        "payload": request.payload,
        "priority": request.priority,
        "max_retries": request.max_retries,
        # A child's key is its parent's, apart from its producer's (``keyed_jobs``).
        "idempotency_key": request.idempotency_key if request.parent_id is None else None,
        "request_fingerprint": request.fingerprint,
        "created_by": actor.id,
        "run_at": request.run_at or now + timedelta(seconds=request.delay_seconds or 0),
        "created_at": now,
        "updated_at": now,
        **({"unique_key": request.unique_key} if request.unique_key is not None else {}),
        **(
            {"parent_id": request.parent_id, "child_key": request.idempotency_key}
            if request.parent_id is not None
            else {}
        ),
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
    group: workflows.GroupRequest | None = None,
) -> Changed[list[tuple[Job, bool]]]:
    """``enqueue_jobs``, then the workflow of the new jobs: they form ``group`` (when given),
    and each waits for the parents it names, jobs that existed before the request or earlier
    items (``workflows``). The jobs come back as they are after that."""
    existing = workflows.existing_parents(conn, actor, requests)  # before the new jobs exist
    added = enqueue_jobs(conn, actor, requests, now=now)
    new = [(index, job) for index, (job, created) in enumerate(added) if created]
    if group is not None and new:
        workflows.form_group(conn, actor, group, [job for _, job in new], now=now)
    linked = [
        workflows.Added(job, requests[index], index)
        for index, job in new
        if requests[index].depends_on or requests[index].after_items
    ]
    effects = NOTHING
    if linked:
        effects = workflows.link(conn, linked, [job.id for job, _ in added], existing, now=now)
    if linked or group is not None:
        fresh = batches_sql.jobs_by_ids(conn, [job.id for _, job in new], None)
        added = [(fresh[job.id][0] if created else job, created) for job, created in added]
    return Changed(added, Effects.of((job for job, created in added if created), now) | effects)


def enqueue_jobs(
    conn: Connection, actor: Actor, requests: Sequence[EnqueueRequest], *, now: datetime
) -> list[tuple[Job, bool]]:
    """Enqueue every request in order, each as ``enqueue`` would (idempotency keys
    included); returns ``(job, created)`` per request. The first refused item raises, naming
    it (``jobs[3]``), and the caller's transaction rolls the others back.

    The rules are the single enqueue's; the SQL is batched: one lookup of the batch's keys (in
    the items' namespace, ``keyed_jobs``) and one insert of its new jobs. Should another
    transaction commit one of the keys meanwhile (the insert collides), the batch is redone
    item by item through ``enqueue``. So is a batch with unique keys: each such item looks for
    its active job after the ones before it."""
    if any(request.unique_key is not None for request in requests):
        uniqueness.wait_for_turns(conn, actor.id, requests)  # every unique key, in one order
        return _one_by_one(conn, actor, requests, now=now)
    keys = {r.idempotency_key for r in requests if r.idempotency_key is not None}
    keyed = keyed_jobs(conn, actor, parent_of(requests), keys)
    stored = {job.idempotency_key: job for job in keyed}
    first_with: dict[str, int] = {}  # the new item a key came with first in this batch
    plan: list[Job | int] = []  # per item: the stored job it replays, or the new item it is
    fresh: list[int] = []  # the new items, in order
    for index, request in enumerate(requests):
        key = request.idempotency_key
        try:
            admit(actor, request)
            if key in stored:
                plan.append(replay(stored[key], request))
                continue
            if key is not None and key in first_with:
                same_request(requests[first_with[key]].fingerprint, request)
                plan.append(first_with[key])
                continue
        except QueueError as exc:
            raise _about_item("jobs", index, exc) from None
        if key is not None:
            first_with[key] = index
        plan.append(index)
        fresh.append(index)
    rows = [new_job_row(actor, requests[index], now=now) for index in fresh]
    if not first_with:  # no idempotency key: nothing to collide on, no savepoint needed
        inserted = batches_sql.insert_jobs(conn, rows, actor=actor.name)
        new = dict(zip(fresh, inserted, strict=True))
    else:
        try:
            with conn.begin_nested():
                inserted = batches_sql.insert_jobs(conn, rows, actor=actor.name)
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
            added.append(enqueue_one(conn, actor, request, now=now))
        except QueueError as exc:
            raise _about_item("jobs", index, exc) from None
    return added
