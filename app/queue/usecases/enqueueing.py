"""Enqueueing: one job or a batch (all or nothing), with its idempotency key, its unique key and
its parents; the caller owns the transaction."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
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
        linked = workflows.link(conn, [workflows.Added(job, request)], {}, existing, now=now)
        job = jobs_sql.get_job(conn, job.id) or job
    return Changed((job, True), Effects.of([job], now) | linked)


def enqueue_one(
    conn: Connection, actor: Actor, request: EnqueueRequest, *, now: datetime
) -> tuple[Job, bool]:
    """``enqueue`` but for the parents, which the caller records (a batch, all at once)."""
    admit(actor, request)
    found = answered_by(conn, actor, request, now=now)
    if found is not None:
        return found, False
    return insert_one(conn, actor, request, now=now)


def answered_by(
    conn: Connection, actor: Actor, request: EnqueueRequest, *, now: datetime
) -> Job | None:
    """The job that answers ``request`` instead of a new one: its idempotency key's (the same
    request's, else 422), then its unique key's active job. Holds the unique key's turn."""
    if request.unique_key is not None:  # before any look, so concurrent enqueues take turns
        uniqueness.wait_for_turns(conn, actor.id, [request])
    if request.idempotency_key is not None:
        existing = _keyed(conn, actor, request)
        if existing is not None:
            return replay(existing, request)
    if request.unique_key is not None:
        return uniqueness.active_job(conn, actor.id, request, now=now)
    return None


def insert_one(
    conn: Connection, actor: Actor, request: EnqueueRequest, *, now: datetime
) -> tuple[Job, bool]:
    """Store the job of ``request``; should a concurrent request with its idempotency key win
    the insert, that request's job (a replay)."""
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
        **({"partition": request.partition} if request.partition is not None else {}),
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
    new = [job for job, created in added if created]
    if group is not None and new:
        workflows.form_group(conn, actor, group, new, now=now)
    linked, effects = _linked(
        conn, dict(enumerate(requests)), dict(enumerate(added)), existing, now=now,
        reread=group is not None,
    )  # fmt: skip
    return Changed([linked[index] for index in range(len(added))], effects)


Answer = tuple[Job, bool] | QueueError  # an item's (job, created), or why it was refused


def enqueue_each(
    conn: Connection, actor: Actor, items: Sequence[EnqueueRequest | QueueError], *, now: datetime
) -> Changed[list[Answer]]:
    """A batch whose items are admitted each on its own (``"atomic": false``): ``items`` holds
    each request, or why its validation refused it. Each item is answered as ``enqueue`` would
    answer it alone after the items before it, and a refused item undoes nothing; an item that
    waits for a refused one (``after_items``) is refused too. Stored as ``enqueue_jobs`` stores
    a batch: a few statements for all of them."""
    requests = {index: item for index, item in enumerate(items) if not isinstance(item, QueueError)}
    # Locked: a parent pruned before the new jobs are linked to it would refuse the whole batch.
    existing = workflows.existing_parents(conn, actor, list(requests.values()), locked=True)
    answers = _admit_all(conn, actor, items, now=now, refuse=_kept, parents=existing)
    added = {index: answer for index, answer in enumerate(answers) if isinstance(answer, tuple)}
    linked, effects = _linked(conn, requests, added, existing, now=now)
    return Changed([linked.get(index, answer) for index, answer in enumerate(answers)], effects)


def _linked(
    conn: Connection,
    requests: Mapping[int, EnqueueRequest],
    added: Mapping[int, tuple[Job, bool]],
    existing: Collection[int],
    *,
    now: datetime,
    reread: bool = False,
) -> tuple[dict[int, tuple[Job, bool]], Effects]:
    """Record the parents of the new jobs among ``added`` (by item index), and read those back
    as they are then (``reread``: even without parents, e.g. once grouped). The effects of
    the new jobs and of linking them."""
    new = {index: job for index, (job, created) in added.items() if created}
    waiting = [
        workflows.Added(job, requests[index], index)
        for index, job in new.items()
        if requests[index].depends_on or requests[index].after_items
    ]
    effects = NOTHING
    if waiting:
        ids = {index: job.id for index, (job, _) in added.items()}
        effects = workflows.link(conn, waiting, ids, existing, now=now)
    result = dict(added)
    if waiting or reread:
        fresh = batches_sql.jobs_by_ids(conn, [job.id for job in new.values()], None)
        result = {i: (fresh[job.id][0] if made else job, made) for i, (job, made) in added.items()}
    created = (job for job, made in result.values() if made)
    return result, Effects.of(created, now) | effects


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
    answers = _admit_all(conn, actor, requests, now=now, refuse=_naming_item, parents=None)
    added = [answer for answer in answers if isinstance(answer, tuple)]
    assert len(added) == len(answers)  # any refusal raised
    return added


# How a batch answers a refused item: by raising, naming it (all or nothing), or by keeping the
# refusal as the item's answer (each item on its own).
Refuse = Callable[[int, QueueError], QueueError]


def _naming_item(index: int, exc: QueueError) -> QueueError:
    raise _about_item("jobs", index, exc) from None


def _kept(index: int, exc: QueueError) -> QueueError:
    return exc


def _admit_all(
    conn: Connection,
    actor: Actor,
    items: Sequence[EnqueueRequest | QueueError],
    *,
    now: datetime,
    refuse: Refuse,
    parents: Collection[int] | None,
) -> list[Answer]:
    """Each item's answer, the new jobs stored; ``parents``: the jobs the items may wait for
    (``workflows.existing_parents``), checked before an item is stored (None: ``link`` checks
    them once all are stored)."""
    requests = [item for item in items if not isinstance(item, QueueError)]
    if any(request.unique_key is not None for request in requests):
        uniqueness.wait_for_turns(conn, actor.id, requests)  # every unique key, in one order
        return _one_by_one(conn, actor, items, now=now, refuse=refuse, parents=parents)
    keys = {r.idempotency_key for r in requests if r.idempotency_key is not None}
    keyed = keyed_jobs(conn, actor, parent_of(requests), keys)
    stored = {job.idempotency_key: job for job in keyed}
    first_with: dict[str, tuple[int, str | None]] = {}  # the new item a key came with first
    steps: list[Job | int | QueueError] = []  # per item: the job it replays, the new item it is
    for index, request in enumerate(items):
        try:
            if isinstance(request, QueueError):
                raise request
            admit(actor, request)
            key = request.idempotency_key
            if key in stored:
                steps.append(replay(stored[key], request))
                continue
            if key is not None and key in first_with:
                first, fingerprint = first_with[key]
                same_request(fingerprint, request)
                steps.append(first)
                continue
            if parents is not None:
                admit_parents(request, parents, steps)
        except QueueError as exc:
            steps.append(refuse(index, exc))
            continue
        if key is not None:
            first_with[key] = (index, request.fingerprint)
        steps.append(index)
    stored_all = _store(conn, actor, items, steps, now=now)
    if stored_all is None:  # another transaction took one of the keys: redo, seeing its job
        return _one_by_one(conn, actor, items, now=now, refuse=refuse, parents=parents)
    return stored_all


def admit_parents(
    request: EnqueueRequest, existing: Collection[int], earlier: Sequence[object]
) -> None:
    """Refuse a new job that names a parent not in ``existing`` (``existing_parents``), or an
    earlier item of its batch that was refused (``earlier``: the answers so far)."""
    workflows.check_parents(request, existing)
    for index in request.after_items:
        refused = earlier[index]
        if isinstance(refused, QueueError):
            message = f"item {index} was refused ({refused.status}): this one cannot wait for it"
            raise InvalidInput({"after_items": message}, message)


def _store(
    conn: Connection,
    actor: Actor,
    items: Sequence[EnqueueRequest | QueueError],
    steps: Sequence[Job | int | QueueError],
    *,
    now: datetime,
) -> list[Answer] | None:
    """Insert the new jobs of a planned batch (one statement); each item's answer, or None
    (and nothing stored) when a concurrent transaction took one of their idempotency keys."""
    fresh = [index for index, step in enumerate(steps) if step == index]
    requests = [item for item in (items[i] for i in fresh) if isinstance(item, EnqueueRequest)]
    rows = [new_job_row(actor, request, now=now) for request in requests]
    if not any(request.idempotency_key is not None for request in requests):
        inserted = batches_sql.insert_jobs(conn, rows, actor=actor.name)  # no key: no collision
    else:
        try:
            with conn.begin_nested():
                inserted = batches_sql.insert_jobs(conn, rows, actor=actor.name)
        except IntegrityError:
            return None
    new = dict(zip(fresh, inserted, strict=True))
    return [
        step if isinstance(step, QueueError)
        else (step, False) if isinstance(step, Job)
        else (new[step], step == index)
        for index, step in enumerate(steps)
    ]  # fmt: skip


def _one_by_one(
    conn: Connection,
    actor: Actor,
    items: Sequence[EnqueueRequest | QueueError],
    *,
    now: datetime,
    refuse: Refuse,
    parents: Collection[int] | None,
) -> list[Answer]:
    """Every item through the single enqueue, in order (``_admit_all``'s arguments)."""
    answers: list[Answer] = []
    for index, request in enumerate(items):
        try:
            if isinstance(request, QueueError):
                raise request
            admit(actor, request)
            found = answered_by(conn, actor, request, now=now)
            if found is None and parents is not None:
                admit_parents(request, parents, answers)
            answers.append(
                (found, False) if found is not None else insert_one(conn, actor, request, now=now)
            )
        except QueueError as exc:
            answers.append(refuse(index, exc))
    return answers
