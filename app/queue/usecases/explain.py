"""Why a job is where it is: one function per reason, each returning a plain sentence and the
figures behind it, or None when it does not apply.

``REASONS`` is the list ``explain`` walks, in the order people read them; a new reason is one
more function in it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from sqlalchemy import Connection

from app.queue.rules import type_limits
from app.queue.rules.settings import QueueSettings
from app.queue.rules.type_limits import TypeLimits
from app.queue.sql import batches as batches_sql
from app.queue.sql import counts as counts_sql
from app.queue.sql import explain as explain_sql
from app.queue.sql import jobs as jobs_sql
from app.queue.sql import type_limits as type_limits_sql
from app.queue.usecases import reading, type_polls
from app.queue.usecases.claim_limits import TypeTurn
from app.queue.usecases.partition_explain import partition_held
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.limits import Override
from app.queue.vocabulary.states import JobStatus
from app.queue.vocabulary.timeutil import human_duration, iso

QUEUE_COUNT_CAP = 10_000  # behind_in_queue counts this far and no further


@dataclass(frozen=True)
class Reason:
    """One answer to "why is this job not running?"."""

    code: str
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    """A job's status and the reasons for it."""

    job: Job
    reasons: list[Reason]


@dataclass(frozen=True)
class Context:
    """What every reason may look at: the job, the clock, the settings and a connection."""

    conn: Connection
    job: Job
    now: datetime
    idle_after: timedelta  # no worker asked for the type this long: nobody polls for it
    settings: QueueSettings

    @property
    def due(self) -> bool:
        job = self.job
        return (
            job.status == JobStatus.PENDING and job.waiting_for is None and job.run_at <= self.now
        )

    @cached_property
    def override(self) -> Override | None:
        """What an admin set for the job's type, if anything."""
        return type_limits_sql.overrides(self.conn).get(self.job.type)

    @cached_property
    def limits(self) -> TypeLimits:
        """The flow limits of the job's type, as claims obey them now."""
        configured = self.settings.flow.get(self.job.type, TypeLimits())
        return type_limits.effective(configured, self.override)

    @cached_property
    def turn(self) -> TypeTurn:
        """What counts against the type's limits now (read as it stands, not locked)."""
        job_type, limits = self.job.type, self.limits
        window = type_limits_sql.window(self.conn, job_type) if limits.rate_limit else None
        running = 0
        if limits.max_running is not None:
            running = counts_sql.running_of_types(self.conn, [job_type])[job_type]
        return TypeTurn(limits, window, running)

    @property
    def held_back(self) -> bool:
        """Whether a claim would skip this due job because of its type's flow limits."""
        held = self.limits.paused or partition_limit(self) is not None
        return held or (self.limits.limited and self.turn.allowance(self.now) == 0)


def _when(at: datetime, now: datetime) -> str:
    """``2030-01-01 09:00:00 UTC (in 5 min 00 s)`` or ``(... ago)``."""
    stamp = f"{at:%Y-%m-%d %H:%M:%S} UTC"
    if at >= now:
        return f"{stamp} (in {human_duration(at - now)})"
    return f"{stamp} ({human_duration(now - at)} ago)"


def waiting_for_dependencies(ctx: Context) -> Reason | None:
    """A job waiting for parents to finish, with their ids and statuses."""
    waiting = ctx.job.waiting_for
    if ctx.job.status != JobStatus.PENDING or not waiting:
        return None
    found = batches_sql.jobs_by_ids(ctx.conn, waiting, None)
    parents = [{"id": p, "status": found[p][0].status} for p in waiting if p in found]
    listed = ", ".join(f"{p['id']} ({p['status']})" for p in parents)
    return Reason(
        "waiting_for_dependencies",
        f"It waits for its parent job(s) {listed} to finish; no worker can claim it before.",
        {"parents": parents},
    )


def scheduled(ctx: Context) -> Reason | None:
    """A job that never failed, waiting for its run_at."""
    job = ctx.job
    if job.status != JobStatus.PENDING or job.run_at <= ctx.now or job.retry_count > 0:
        return None
    return Reason(
        "scheduled",
        f"It is scheduled for {_when(job.run_at, ctx.now)}; no worker can claim it before then.",
        {"run_at": iso(job.run_at), "seconds": (job.run_at - ctx.now).total_seconds()},
    )


def backing_off(ctx: Context) -> Reason | None:
    """A job whose last attempt failed, waiting out its backoff."""
    job = ctx.job
    if job.status != JobStatus.PENDING or job.run_at <= ctx.now or job.retry_count == 0:
        return None
    return Reason(
        "backing_off",
        f"Attempt {job.attempts} failed; retry {job.retry_count} of {job.max_retries} waits "
        f"for its backoff until {_when(job.run_at, ctx.now)}.",
        {
            "run_at": iso(job.run_at),
            "seconds": (job.run_at - ctx.now).total_seconds(),
            "retry_count": job.retry_count,
            "max_retries": job.max_retries,
        },
    )


def type_paused(ctx: Context) -> Reason | None:
    """A pending job of a paused type: no claim hands it out until the type is resumed."""
    job = ctx.job
    if job.status != JobStatus.PENDING or not ctx.limits.paused:
        return None
    admin = ctx.override if ctx.override is not None and ctx.override.paused else None
    if admin is None:
        who = "in the configuration (JOB_TYPE_SETTINGS)"
    else:
        who = f"by an admin (its limits were last changed by {admin.updated_by} at "
        who += f"{admin.updated_at:%Y-%m-%d %H:%M:%S} UTC)"
    return Reason(
        "type_paused",
        f"Its type {job.type} is paused {who}: no claim hands out its jobs until the type is "
        "resumed.",
        {
            "type": job.type,
            "source": "configuration" if admin is None else "override",
            "changed_by": None if admin is None else admin.updated_by,
            "changed_at": None if admin is None else iso(admin.updated_at),
        },
    )


def type_at_max_running(ctx: Context) -> Reason | None:
    """A due job whose type already runs as many jobs as its max_running allows."""
    limit = ctx.limits.max_running
    if not ctx.due or ctx.limits.paused or limit is None or ctx.turn.running < limit:
        return None
    running = ctx.turn.running
    return Reason(
        "type_at_max_running",
        f"{running:,} job(s) of its type {ctx.job.type} are running and max_running is "
        f"{limit:,}: it waits until one of them finishes.",
        {"type": ctx.job.type, "max_running": limit, "running": running},
    )


def type_rate_limited(ctx: Context) -> Reason | None:
    """A due job whose type had all the claims its rate_limit allows in this window."""
    rate = ctx.limits.rate_limit
    if not ctx.due or ctx.limits.paused or rate is None:
        return None
    claims = ctx.turn.claims_in_window(ctx.now)
    if claims < rate.count:
        return None
    start = rate.window_start(ctx.now)
    ends = start + timedelta(seconds=rate.seconds)
    return Reason(
        "type_rate_limited",
        f"Its type {ctx.job.type} had its {rate.count:,} claim(s) of this {rate.unit} "
        f"(rate_limit {rate}); the next window opens at {_when(ends, ctx.now)}.",
        {
            "type": ctx.job.type,
            "rate_limit": str(rate),
            "claims_in_window": claims,
            "window_started_at": iso(start),
            "window_ends_at": iso(ends),
        },
    )


def partition_limit(ctx: Context) -> Reason | None:
    """A due job whose partition of its type runs or claimed what its partition limits allow."""
    held = ctx.due and not ctx.limits.paused
    found = partition_held(ctx.conn, ctx.job, ctx.limits, ctx.now) if held else None
    return None if found is None else Reason("partition_limit", *found)


def behind_in_queue(ctx: Context) -> Reason | None:
    """A due job and how many due jobs a claim hands out before it."""
    if not ctx.due:
        return None
    ahead = explain_sql.jobs_ahead(ctx.conn, ctx.job, ctx.now, QUEUE_COUNT_CAP)
    capped = ahead >= QUEUE_COUNT_CAP
    if ahead == 0 and ctx.held_back:
        detail = "It is due and next in line once its type may run again."
    elif ahead == 0:
        detail = "It is due and next in line: the next claim takes it."
    else:
        count = f"At least {ahead:,}" if capped else f"{ahead:,}"
        jobs = "job goes" if ahead == 1 else "jobs go"
        detail = (
            f"It is due; {count} due {jobs} first (higher priority, or the same priority "
            "and due earlier)."
        )
    return Reason("behind_in_queue", detail, {"ahead": ahead, "capped": capped})


def no_worker_polling(ctx: Context) -> Reason | None:
    """A due job of a type no worker asked for lately, whether its claims found a job or not
    (a paused type's jobs are never handed out: no point blaming workers)."""
    if not ctx.due or ctx.limits.paused:
        return None
    polled = type_polls.last_poll(ctx.conn, ctx.job.type)
    if polled is not None and polled >= ctx.now - ctx.idle_after:
        return None
    return Reason(
        "no_worker_polling",
        f"No worker has asked for jobs of type {ctx.job.type} in the last "
        f"{human_duration(ctx.idle_after)}: check that workers for this type are running.",
        {"window_seconds": ctx.idle_after.total_seconds(), "type": ctx.job.type},
    )


def running(ctx: Context) -> Reason | None:
    """A job a worker holds: since when, its last sign of life, and its lease."""
    job = ctx.job
    if job.status != JobStatus.RUNNING or job.lease_expires_at is None:
        return None
    claimed = job.claimed_at or job.updated_at
    # A heartbeat moves updated_at; a job claimed and never heard from since has none.
    beat = job.updated_at if job.updated_at > claimed else None
    heard = f"last heartbeat {_when(beat, ctx.now)}" if beat else "no heartbeat yet"
    lease = job.lease_expires_at
    if lease > ctx.now:
        ends = f"its lease runs until {_when(lease, ctx.now)}."
    else:
        ends = (
            f"its lease expired {_when(lease, ctx.now)}: the job goes back to the queue at "
            "the next claim or reap."
        )
    return Reason(
        "running",
        f"Worker {job.worker_id} holds attempt {job.attempts} since {_when(claimed, ctx.now)}; "
        f"{heard}; {ends}",
        {
            "worker_id": job.worker_id,
            "attempt": job.attempts,
            "claimed_at": iso(claimed),
            "last_heartbeat_at": iso(beat),
            "lease_expires_at": iso(lease),
            "lease_expired": lease <= ctx.now,
        },
    )


def retries_exhausted(ctx: Context) -> Reason | None:
    """A job that failed for good."""
    job = ctx.job
    if job.status != JobStatus.FAILED:
        return None
    if job.retry_count < job.max_retries:
        why = f"its last failure was marked not retryable ({job.retry_count} of "
        why += f"{job.max_retries} retries used)"
    else:
        why = f"all {job.max_retries} retries were used"
    finished = job.finished_at or job.updated_at
    return Reason(
        "retries_exhausted",
        f"It failed for good {_when(finished, ctx.now)} after {job.attempts} attempt(s): "
        f"{why}. An admin can retry it.",
        {
            "attempts": job.attempts,
            "retry_count": job.retry_count,
            "max_retries": job.max_retries,
            "finished_at": iso(finished),
        },
    )


def cancelled(ctx: Context) -> Reason | None:
    """A cancelled job, and who cancelled it."""
    job = ctx.job
    if job.status != JobStatus.CANCELLED:
        return None
    by = next(
        (
            e.actor
            for e in reversed(jobs_sql.list_events(ctx.conn, job.id))
            if e.kind == "cancelled"
        ),
        None,
    )
    finished = job.finished_at or job.updated_at
    who = f" by {by}" if by else ""
    return Reason(
        "cancelled",
        f"It was cancelled{who} {_when(finished, ctx.now)} and will not run unless an admin "
        "retries it.",
        {"cancelled_at": iso(finished), "cancelled_by": by},
    )


def completed(ctx: Context) -> Reason | None:
    """A job that finished successfully."""
    job = ctx.job
    if job.status != JobStatus.COMPLETED:
        return None
    finished = job.finished_at or job.updated_at
    return Reason(
        "completed",
        f"It completed {_when(finished, ctx.now)} after {job.attempts} attempt(s); it will "
        "not run again.",
        {"attempts": job.attempts, "finished_at": iso(finished)},
    )


REASONS: tuple[Callable[[Context], Reason | None], ...] = (
    waiting_for_dependencies,
    scheduled,
    backing_off,
    type_paused,
    type_at_max_running,
    type_rate_limited,
    partition_limit,
    behind_in_queue,
    no_worker_polling,
    running,
    retries_exhausted,
    cancelled,
    completed,
)


# What may hold a pending job besides time (what ``held_beyond_time`` asks).
NOT_TIME = (
    waiting_for_dependencies,
    type_paused,
    type_at_max_running,
    type_rate_limited,
    partition_limit,
)


def held_beyond_time(
    conn: Connection, job: Job, *, now: datetime, settings: QueueSettings
) -> Reason | None:
    """What would still hold ``job`` were it due at ``now`` (its dependencies, its type paused,
    a flow limit), as the explainer says it; None when only time holds it."""
    ctx = Context(conn, replace(job, run_at=min(job.run_at, now)), now, timedelta(0), settings)
    return next((reason for check in NOT_TIME if (reason := check(ctx)) is not None), None)


def explain(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    idle_after: timedelta,
    settings: QueueSettings,
) -> Explanation:
    """Why the job is not running (or what it is doing), for anyone who may see the job."""
    job = reading.get_job(conn, actor, job_id)
    ctx = Context(conn, job, now, idle_after, settings)
    return Explanation(job, [reason for check in REASONS if (reason := check(ctx)) is not None])
