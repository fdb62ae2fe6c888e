"""Workflows: jobs that wait for parents, and groups whose callbacks are enqueued
once every member has finished. Everything happens in the transaction of the change that
causes it: the finish of a job's last parent makes it claimable (or cancels it), the finish of
a group's last member enqueues the group's callbacks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from app.audit import store as audit_store
from app.audit.actions import GROUPS_ACTOR, AuditAction, Origin
from app.queue.rules.policy import priority_cap, sees_group, still_enqueues
from app.queue.rules.visibility import visibility
from app.queue.sql import batches as batches_sql
from app.queue.sql import children as children_sql
from app.queue.sql import jobs as jobs_sql
from app.queue.sql import workflows as workflows_sql
from app.queue.sql.jobs import append_events, event_row
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import NOTHING, Effects
from app.queue.vocabulary.errors import Forbidden, InvalidInput, NotFound
from app.queue.vocabulary.jobs import EnqueueRequest, Job, parent_of
from app.queue.vocabulary.states import TERMINAL, EventKind, JobStatus, priority_label

_BROKEN = {JobStatus.FAILED: "failed", JobStatus.CANCELLED: "was cancelled"}


def settle(conn: Connection, moved: Iterable[Job], *, now: datetime) -> Effects:
    """Everything that follows from ``moved`` jobs finishing (completed, failed for good or
    cancelled): their groups count them, their waiting children are released or cancelled,
    and what those cancellations finish in turn, level by level. Nothing runs for jobs that
    are in no group and have no dependents. What it did: the children it released or
    cancelled, the callbacks it enqueued (not the moved jobs' own effects)."""
    effects = NOTHING
    finished = [job for job in moved if job.status in TERMINAL]
    while finished:
        effects |= _count_in_groups(conn, finished, now=now, sign=1)
        parents = [job for job in finished if job.has_dependents]
        finished, released = _release_children(conn, parents, now=now) if parents else ([], NOTHING)
        effects |= released | Effects.of(finished, now)
    return effects


def moved(conn: Connection, job: Job, *, reopened: bool, now: datetime) -> Effects:
    """What follows from one job's move: ``settle`` when it finished; when an admin retried
    it (``reopened``, from failed or cancelled), its group counts it unfinished again."""
    if reopened:
        return _count_in_groups(conn, [job], now=now, sign=-1)
    return settle(conn, [job], now=now)


def _release_children(
    conn: Connection, parents: Sequence[Job], *, now: datetime
) -> tuple[list[Job], Effects]:
    """Cancel the waiting children of the parents that failed or were cancelled (unless they
    asked to run anyway), then strike every parent off its children's waiting lists: two or
    three statements however many children. The children cancelled, and the effects of those
    that stopped waiting."""
    broken = {job.id: job.status for job in parents if job.status != JobStatus.COMPLETED}
    cancelled = cancel_children(
        conn, workflows_sql.children_to_cancel(conn, broken), broken, now=now
    )
    released = workflows_sql.release(conn, [job.id for job in parents], now)
    return cancelled, Effects.coming(released, now)


def cancel_children(
    conn: Connection, causes: Mapping[int, int], statuses: Mapping[int, str], *, now: datetime
) -> list[Job]:
    """Cancel the waiting jobs of ``causes`` (child id -> the parent that failed), each with
    a ``cancelled`` event naming its parent (``statuses``: the parents' statuses)."""
    if not causes:
        return []
    cancelled = workflows_sql.cancel_waiting(conn, causes, now)
    events = []
    for job in cancelled:
        parent = causes[job.id]
        note = f"parent {parent} {_BROKEN[JobStatus(statuses[parent])]}"
        events.append(
            event_row(
                job=job,
                at=now,
                from_status=JobStatus.PENDING,
                kind=EventKind.CANCELLED,
                actor=None,
                note=note,
            )
        )
    append_events(conn, events)
    return cancelled


@dataclass(frozen=True)
class Added:
    """A job just enqueued with parents: the request it came from, and where it stood in its
    batch (``index``: None for ``POST /jobs``, whose fields have no ``jobs[i].`` prefix)."""

    job: Job
    request: EnqueueRequest
    index: int | None = None

    def field(self, name: str) -> str:
        return name if self.index is None else f"jobs[{self.index}].{name}"


def existing_parents(
    conn: Connection, actor: Actor, requests: Sequence[EnqueueRequest], *, locked: bool = False
) -> set[int]:
    """The jobs that ``requests`` name in ``depends_on`` and may wait for, read before any of
    them is stored: a job never waits for itself or a later job, so no cycle can be written.
    A producer's jobs may wait for the jobs it can see; children (``parent_of``) for their
    parent and its other children only. One read, none when no request names a parent;
    ``locked``: none of them can be deleted (pruned) before the transaction ends."""
    named = {parent for request in requests for parent in request.depends_on}
    if not named:
        return set()
    parent = parent_of(requests)
    allowed = visibility(actor) if parent is None else children_sql.family(parent)
    found = batches_sql.jobs_by_ids(conn, named, allowed, locked=locked)
    return {job_id for job_id, (_, may) in found.items() if may}


def check_parents(request: EnqueueRequest, existing: Collection[int]) -> None:
    """Refuse, before it is stored, a job naming a parent not in ``existing``
    (``existing_parents``), as ``link`` would refuse it once stored."""
    for parent in request.depends_on:
        if parent not in existing:
            raise _unknown_parent("depends_on", parent)


def link(
    conn: Connection,
    added: Sequence[Added],
    ids: Mapping[int, int],
    existing: Collection[int],
    *,
    now: datetime,
) -> Effects:
    """Record the parents of jobs just enqueued (``ids``: the batch's job ids by item index, for
    ``after_items``); a job named that is not in ``existing`` (``existing_parents``) is
    refused as if it did not exist. A job waits for its unfinished parents; one with a parent
    already failed or cancelled is cancelled at once unless it asked to run anyway. What the
    cancellations did."""
    for item in added:
        for parent in item.request.depends_on:
            if parent not in existing:
                raise _missing(item, parent)
    parents = {
        item.job.id: list(
            dict.fromkeys([*item.request.depends_on, *(ids[i] for i in item.request.after_items)])
        )
        for item in added
    }
    statuses = workflows_sql.mark_parents(conn, {p for listed in parents.values() for p in listed})
    for item in added:  # a parent deleted (pruned) since it was read is gone all the same
        for parent in parents[item.job.id]:
            if parent not in statuses:
                raise _missing(item, parent)
    edges, rows, doomed = [], [], {}
    for item in added:
        policy = item.request.on_dependency_failure
        listed = parents[item.job.id]
        edges += [{"parent_id": p, "child_id": item.job.id, "on_failure": policy} for p in listed]
        broken = [p for p in listed if statuses[p] in _BROKEN]
        waiting = [p for p in listed if statuses[p] not in TERMINAL]
        if broken and policy == "cancel":
            doomed[item.job.id] = broken[0]
            waiting = broken  # waits until cancelled below
        rows.append({"job_id": item.job.id, "depends_on": listed, "waiting_for": waiting or None})
    workflows_sql.add_edges(conn, edges)
    workflows_sql.set_parents(conn, rows)
    cancelled = cancel_children(conn, doomed, statuses, now=now)
    return Effects.of(cancelled, now) | settle(conn, cancelled, now=now)


def _missing(item: Added, parent: int) -> InvalidInput:
    """The refusal of a parent that does not exist, or that the item may not wait for."""
    return _unknown_parent(item.field("depends_on"), parent)


def _unknown_parent(field: str, parent: int) -> InvalidInput:
    message = f"job {parent} does not exist"
    return InvalidInput({field: message}, message)


def _visible(actor: Actor) -> Any:

    return visibility(actor)


# Groups.


@dataclass(frozen=True)
class GroupRequest:
    """A batch's ``group``: its name and callbacks (enqueued once the members have finished)."""

    name: str
    on_complete: EnqueueRequest | None = None
    on_success: EnqueueRequest | None = None


def form_group(
    conn: Connection, actor: Actor, spec: GroupRequest, members: Sequence[Job], *, now: datetime
) -> int:
    """A group of ``members`` (jobs just enqueued by ``actor``) with the callbacks of
    ``spec``, which the caller's priority cap applies to. Its id."""
    for which in ("on_complete", "on_success"):
        callback = getattr(spec, which)
        if callback is not None and callback.priority > priority_cap(actor):
            raise Forbidden(f"group.{which}: priority is above your cap")
    group_id = workflows_sql.create_group(
        conn,
        {
            "name": spec.name,
            "created_by": actor.id,
            "total": len(members),
            "unfinished": len(members),
            "on_complete": spec.on_complete and callback_spec(spec.on_complete),
            "on_success": spec.on_success and callback_spec(spec.on_success),
            "created_at": now,
        },
    )
    workflows_sql.join_group(conn, group_id, [job.id for job in members])
    return group_id


def callback_spec(request: EnqueueRequest) -> dict[str, Any]:
    """What a group keeps of a callback's request, to enqueue it when the group finishes."""
    return {
        "type": request.type,
        "payload": request.payload,
        "priority": request.priority,
        "max_retries": request.max_retries,
        "run_at": request.run_at.isoformat() if request.run_at else None,
        "delay_seconds": request.delay_seconds,
        **({"partition": request.partition} if request.partition is not None else {}),
    }


def _count_in_groups(conn: Connection, jobs: Sequence[Job], *, now: datetime, sign: int) -> Effects:
    """Count finished (``sign`` 1) or reopened (-1) members out of or back into their
    groups; a group whose last member finished enqueues its callbacks (their effects)."""
    finished = Counter(job.group_id for job in jobs if job.group_id is not None)
    if not finished:
        return NOTHING
    failed = Counter(
        job.group_id
        for job in jobs
        if job.group_id is not None and job.status != JobStatus.COMPLETED
    )
    moves = [
        {"group_id": group, "finished": sign * n, "failed": sign * failed[group]}
        for group, n in sorted(finished.items())
    ]
    callbacks: list[Job] = []
    for group in workflows_sql.move_groups(conn, moves, now):
        if group.unfinished == 0:
            callbacks += _fire(conn, group, now=now)
    return Effects.of(callbacks, now)


def _fire(conn: Connection, group: workflows_sql.Group, *, now: datetime) -> list[Job]:
    """Enqueue the callbacks of a group whose members have all finished, each at most once,
    if its producer may still enqueue them: else the group records why (once) and the audit
    log says so. The callbacks enqueued."""
    due = [("on_complete", group.on_complete, group.on_complete_id)]
    if group.unsuccessful == 0:
        due.append(("on_success", group.on_success, group.on_success_id))
    refused = dict(group.callbacks_refused or {})
    waiting = [(w, spec) for w, spec, done in due if spec and done is None and w not in refused]
    if not waiting:
        return []
    owner = children_sql.producer(conn, group.created_by)
    enqueued = []
    for which, spec in waiting:
        reason = _refusal(owner, spec["priority"])
        if reason is None:
            enqueued.append(_enqueue_callback(conn, group, which, spec, now=now))
            continue
        refused[which] = reason
        audit_store.record(
            conn,
            Origin(GROUPS_ACTOR),
            AuditAction.GROUP_CALLBACK_REFUSED,
            f"group:{group.id}",
            at=now,
            callback=which,
            reason=reason,
        )
    if refused != (group.callbacks_refused or {}):
        workflows_sql.refuse_callbacks(conn, group.id, refused)
    return enqueued


def _refusal(owner: children_sql.Producer | None, priority: int) -> str | None:
    """Why a group's producer may not enqueue a callback of ``priority`` now, or None: the
    rules a job's children and schedules obey, at the moment the group finishes (its producer
    may have been disabled or capped lower since)."""
    if owner is None or not still_enqueues(owner.actor(), disabled=owner.disabled):
        return "the group's producer may no longer enqueue jobs"
    cap = priority_cap(owner.actor())
    if priority > cap:
        label, cap_label = priority_label(priority), priority_label(cap)
        return f"priority {label} is above the producer's cap ({cap_label})"
    return None


def _enqueue_callback(
    conn: Connection,
    group: workflows_sql.Group,
    which: str,
    spec: Mapping[str, Any],
    *,
    now: datetime,
) -> Job:
    """Enqueue the group's ``which`` callback from the description it keeps (``spec``)."""
    delay = timedelta(seconds=spec.get("delay_seconds") or 0)
    run_at = datetime.fromisoformat(spec["run_at"]) if spec.get("run_at") else now + delay
    row = {
        "type": spec["type"],
        "payload": spec["payload"],
        "priority": spec["priority"],
        "max_retries": spec["max_retries"],
        "created_by": group.created_by,
        "run_at": run_at,
        "created_at": now,
        "updated_at": now,
        "callback_of": group.id,
        **({"partition": spec["partition"]} if spec.get("partition") else {}),
    }
    job = jobs_sql.insert_job(conn, row, actor=f"group {group.id}")
    assert job is not None  # no idempotency key: nothing to collide on
    workflows_sql.set_callback(conn, group.id, which, job.id)
    return job


@dataclass(frozen=True)
class GroupView:
    """A group as ``GET /groups/{id}`` shows it."""

    id: int
    name: str
    total: int
    counts: dict[str, int]
    finished: bool
    on_complete: int | None
    on_success: int | None
    created_by: int
    callbacks_refused: dict[str, str]  # why a callback was not enqueued, by which

    @property
    def done(self) -> int:
        """How many members have finished."""
        return sum(self.counts.get(status, 0) for status in TERMINAL)


def get_group(conn: Connection, actor: Actor, group_id: int) -> GroupView:
    """A group its owner or an admin may see; NotFound for anyone else, as for a missing one."""
    row = workflows_sql.get_group(conn, group_id)
    if row is None or not sees_group(actor, row.created_by):
        raise NotFound(f"group {group_id} does not exist")
    counts = {status.value: 0 for status in JobStatus}
    counts |= workflows_sql.member_counts(conn, group_id)
    return GroupView(
        id=row.id,
        name=row.name,
        total=row.total,
        counts=counts,
        finished=row.unfinished == 0,
        on_complete=row.on_complete_id,
        on_success=row.on_success_id,
        created_by=row.created_by,
        callbacks_refused=row.callbacks_refused or {},
    )


def relatives(conn: Connection, actor: Actor, job: Job) -> tuple[list[Job], list[Job]]:
    """The parents and the children (in the dependency sense) of ``job`` that ``actor`` may
    see."""
    parents, children = workflows_sql.parents_and_children(conn, job)
    ids = {j.id for j in (*parents, *children)}
    seen = batches_sql.jobs_by_ids(conn, ids, _visible(actor))
    return (
        [j for j in parents if seen[j.id][1]],
        [j for j in children if seen[j.id][1]],
    )
