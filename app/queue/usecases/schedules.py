"""Schedules' use cases: admins manage them; ticks turn due slots into jobs, exactly one job
per slot however many processes tick (see ``schedules_sql.claim_slot``).

Like every use case: the caller owns the transaction (a change's audit row is written in it, as
``origin`` at ``now``) and the clock is the ``now`` argument.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from app.audit import store as audit_store
from app.audit.actions import AuditAction, Origin
from app.queue.contract.job_requests import EnqueueBody
from app.queue.contract.schedules import ScheduleCreate, ScheduleUpdate
from app.queue.rules import cron
from app.queue.rules.settings import QueueSettings
from app.queue.sql import schedules as schedules_sql
from app.queue.usecases import enqueueing
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import NOTHING, Changed
from app.queue.vocabulary.errors import Conflict, InvalidInput, NotFound
from app.queue.vocabulary.jobs import EnqueueRequest, Job
from app.queue.vocabulary.schedules import Schedule
from app.queue.vocabulary.states import Role

log = logging.getLogger(__name__)
TICK_BATCH = 100  # schedules fired per tick transaction
NEXT_RUNS = 5  # fire times shown with a schedule
# The fields whose change moves the next slot.
_TIMING = ("cron", "timezone", "enabled")


def _changed(
    conn: Connection, origin: Origin, now: datetime, change: str, schedule: Schedule, **details: Any
) -> None:
    """Every change of a schedule ends here, inside its transaction: its audit row (one for
    the API and the pages alike, as ``origin`` at ``now``) and a log line."""
    target = f"schedule:{schedule.id}"
    audit_store.record(
        conn, origin, AuditAction.SCHEDULE_CHANGE, target, at=now, change=change, **details
    )
    log.info("schedule %s (%d): %s by %s", schedule.name, schedule.id, change, origin.actor)


class NameTaken(Conflict):
    """A schedule with this name already exists."""


def _duplicate(name: str | None) -> Conflict:
    return NameTaken(f"a schedule named {name!r} already exists; choose another name")


def _first_slot(expression: str, timezone: str, enabled: bool, now: datetime) -> datetime | None:
    return cron.next_after(expression, timezone, now) if enabled else None


def next_runs(schedule: Schedule, now: datetime, count: int = NEXT_RUNS) -> list[datetime]:
    """The schedule's next ``count`` fire times after ``now`` (none while disabled)."""
    if not schedule.enabled:
        return []
    return cron.upcoming(schedule.cron, schedule.timezone, now, count)


def create(
    conn: Connection, actor: Actor, request: ScheduleCreate, *, now: datetime, origin: Origin
) -> Schedule:
    """Add a schedule; its first slot is the first fire time after ``now``."""
    values = request.columns() | {
        "next_run_at": _first_slot(request.cron, request.timezone, request.enabled, now),
        "created_by": actor.id,
        "created_at": now,
        "updated_at": now,
    }
    try:
        schedule = schedules_sql.insert_schedule(conn, values)
    except schedules_sql.DuplicateName:
        raise _duplicate(request.name) from None
    _changed(conn, origin, now, "create", schedule)
    return schedule


def list_schedules(conn: Connection, actor: Actor) -> list[Schedule]:
    """Every schedule, by name."""
    return schedules_sql.list_schedules(conn)


def get(conn: Connection, actor: Actor, schedule_id: int) -> Schedule:
    """One schedule; NotFound when there is none with this id."""
    schedule = schedules_sql.get_schedule(conn, schedule_id)
    if schedule is None:
        raise NotFound(f"schedule {schedule_id} does not exist")
    return schedule


def update(
    conn: Connection,
    actor: Actor,
    schedule_id: int,
    request: ScheduleUpdate,
    *,
    now: datetime,
    origin: Origin,
) -> Schedule:
    """Change the given fields. A new cron, time zone or enabling starts again from the first
    fire time after ``now`` (slots missed while disabled are not caught up)."""
    current = get(conn, actor, schedule_id)
    changes = request.columns()
    if any(name in changes and changes[name] != getattr(current, name) for name in _TIMING):
        expression = changes.get("cron", current.cron)
        timezone = changes.get("timezone", current.timezone)
        enabled = changes.get("enabled", current.enabled)
        changes["next_run_at"] = _first_slot(expression, timezone, enabled, now)
    try:
        schedule = schedules_sql.update_schedule(conn, schedule_id, changes | {"updated_at": now})
    except schedules_sql.DuplicateName:
        raise _duplicate(changes.get("name")) from None
    if schedule is None:  # deleted meanwhile
        raise NotFound(f"schedule {schedule_id} does not exist")
    if request.model_fields_set == {"enabled"}:  # the pages' switch
        _changed(conn, origin, now, "enable" if schedule.enabled else "disable", schedule)
    else:
        _changed(conn, origin, now, "update", schedule, fields=sorted(request.model_fields_set))
    return schedule


def delete(
    conn: Connection, actor: Actor, schedule_id: int, *, now: datetime, origin: Origin
) -> Schedule:
    """Delete a schedule and return it; the jobs it already enqueued stay."""
    schedule = get(conn, actor, schedule_id)
    if not schedules_sql.delete_schedule(conn, schedule_id):
        raise NotFound(f"schedule {schedule_id} does not exist")
    _changed(conn, origin, now, "delete", schedule)
    return schedule


def _runner(schedule: Schedule) -> Actor:
    """Who enqueues a schedule's jobs: the admin who created it, named after the schedule in
    the job's history."""
    return Actor(id=schedule.created_by, name=f"schedule:{schedule.name}", role=Role.ADMIN)


def _request(schedule: Schedule, settings: QueueSettings) -> EnqueueRequest:
    """The schedule's job as an enqueue request, through the same validation as every job;
    ``InvalidInput`` when the configuration changed since (its type was removed...)."""
    body = {"type": schedule.type, "payload": schedule.payload, "priority": schedule.priority_label}
    if schedule.partition is not None:
        body["partition"] = schedule.partition
    return EnqueueBody.parse(body, settings).to_request()


def _enqueue(
    conn: Connection, schedule: Schedule, request: EnqueueRequest, now: datetime
) -> Changed[Job]:
    done = enqueueing.enqueue(conn, _runner(schedule), request, now=now)
    job, _ = done.value
    return Changed(job, done.effects)


def run_now(
    conn: Connection,
    actor: Actor,
    schedule_id: int,
    *,
    now: datetime,
    settings: QueueSettings,
    origin: Origin,
) -> Changed[Job]:
    """Enqueue one job of the schedule at once; its slots are not affected."""
    schedule = get(conn, actor, schedule_id)
    try:
        request = _request(schedule, settings)
    except InvalidInput as exc:
        raise Conflict(f"schedule {schedule.name!r} cannot enqueue: {exc.detail}") from None
    enqueued = _enqueue(conn, schedule, request, now)
    schedules_sql.set_last_run(conn, schedule_id, now)
    _changed(conn, origin, now, "run", schedule, job=enqueued.value.id)
    return enqueued


@dataclass(frozen=True)
class Fired:
    """What one tick did with one due schedule."""

    schedule: Schedule
    slot: datetime | None  # the slot the job stands for; None when the slots were skipped
    job: Job | None


def tick(
    conn: Connection,
    *,
    now: datetime,
    settings: QueueSettings,
    grace: timedelta,
    limit: int = TICK_BATCH,
) -> Changed[list[Fired]]:
    """Fire up to ``limit`` due schedules; returns what was claimed by this caller.

    A slot at most ``grace`` old is on time and gets its job. Older slots were missed (the
    service was down): ``catch_up="skip"`` drops them, ``"one"`` enqueues a single job for
    all of them. Either way the schedule moves to its first fire time after ``now``."""
    fired = []
    effects = NOTHING
    for schedule in schedules_sql.due_schedules(conn, now, limit):
        outcome = _fire(conn, schedule, now=now, settings=settings, grace=grace)
        if outcome is not None:
            fired.append(outcome.value)
            effects |= outcome.effects
    return Changed(fired, effects)


def _fire(
    conn: Connection,
    schedule: Schedule,
    *,
    now: datetime,
    settings: QueueSettings,
    grace: timedelta,
) -> Changed[Fired] | None:
    slot = schedule.next_run_at
    assert slot is not None  # due_schedules only returns schedules with a slot
    following = cron.next_after(schedule.cron, schedule.timezone, slot)
    if following is None or following > now:  # the usual case: one slot is due
        latest, next_run_at = slot, following
    else:  # several slots passed: the service was down, or nobody ticked
        latest = cron.latest_at_or_before(schedule.cron, schedule.timezone, now) or slot
        next_run_at = cron.next_after(schedule.cron, schedule.timezone, now)
    try:
        request: EnqueueRequest | None = _request(schedule, settings)
    except InvalidInput as exc:
        # Later slots would fail alike: the slot passes without a job and the log says why.
        log.warning("schedule %s cannot enqueue: %s", schedule.name, exc.detail)
        request = None
    if request is not None and not schedules_sql.creator_may_run(conn, schedule.created_by):
        # A disabled (or demoted) account's schedules do not act in its name either.
        log.warning("schedule %s: its creator is disabled or no longer an admin", schedule.name)
        request = None
    run = request is not None and (schedule.catch_up == "one" or now - latest <= grace)
    claimed = schedules_sql.claim_slot(
        conn,
        schedule.id,
        slot=slot,
        next_run_at=next_run_at,
        last_run_at=latest if run else None,
    )
    if not claimed:  # another process moved this schedule first
        return None
    if request is None or not run:
        return Changed(Fired(schedule, None, None))
    enqueued = _enqueue(conn, schedule, request, now)
    return Changed(Fired(schedule, latest, enqueued.value), enqueued.effects)
