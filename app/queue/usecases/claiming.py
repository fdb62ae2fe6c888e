"""Claims, from the route to the statement: expired leases recovered first, then the next due
jobs for a worker in claim order within every type's limits (``claim_limits``), each with its
attempt and lease; and when nothing is due, when the clock next makes a job claimable. Each step
returns what it learned (the jobs, what recovering leases did, when to look again) to its
caller, which decides what to answer and whom to wake.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from app.queue.rules import edges
from app.queue.rules.backoff import Uniform
from app.queue.rules.settings import QueueSettings
from app.queue.sql import due as due_sql
from app.queue.sql import edges as edges_sql
from app.queue.sql import parents as parents_sql
from app.queue.usecases import finishing, type_polls
from app.queue.usecases.claim_limits import claim_within_limits
from app.queue.usecases.type_polls import PollNotes
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import NOTHING, Changed, Effects
from app.queue.vocabulary.jobs import Job, ParentResult

_system_random = random.SystemRandom()
LEASE_EXPIRED = "lease expired"


@dataclass(frozen=True)
class Taken:
    """What a claim did: the jobs it took, what recovering expired leases did (``effects``),
    and, when type limits held due jobs back, when to look again (``held_back_until``); for
    each taken job that depends on others, what its parents returned (``parents``)."""

    jobs: list[Job]
    effects: Effects = NOTHING
    held_back_until: datetime | None = None
    parents: dict[int, list[ParentResult]] = field(default_factory=dict)


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
) -> Taken:
    """Give the caller up to ``max_jobs`` due jobs (of ``types``, when given) in claim order,
    each with its own attempt and lease, recovering a batch of expired leases first. Paused
    types and types at their limits wait (``claim_limits``). Found or not, the types asked for
    are noted as polled when ``polls`` is given (this process's memory of its last notes: the
    API's claims; the command line and benchmarks note nothing)."""
    recovered = recover_expired(
        conn, now=now, settings=settings, limit=settings.recover_batch, uniform=uniform
    )
    jobs, held_back_until = claim_within_limits(
        conn,
        settings=settings,
        worker=actor.name,
        now=now,
        lease_seconds=lease_seconds or settings.default.lease_seconds,
        limit=max_jobs,
        types=types,
        type_leases=() if lease_seconds else settings.type_leases,
    )
    if polls is not None:  # after the claim's own writes: every claim locks in one order
        type_polls.note(conn, polls, types or settings.job_types, now)
    return Taken(jobs, recovered.effects, held_back_until, parents_of(conn, jobs))


def parents_of(conn: Connection, claimed: Sequence[Job]) -> dict[int, list[ParentResult]]:
    """What the parents of each claimed job that has ``depends_on`` returned, in the order it
    named them, by job id: one read for the whole batch, none when no job depends on another.
    A parent deleted since (retention) is left out. The worker runs the dependent job, so it
    may read its parents' results; their payloads and errors stay unread."""
    named = {job.id: job.depends_on for job in claimed if job.depends_on}
    if not named:
        return {}
    found = parents_sql.parent_results(conn, {p for ids in named.values() for p in ids})
    return {job_id: [found[p] for p in ids if p in found] for job_id, ids in named.items()}


def claim(
    conn: Connection,
    actor: Actor,
    *,
    now: datetime,
    settings: QueueSettings,
    lease_seconds: int | None = None,
    types: tuple[str, ...] | None = None,
    uniform: Uniform = _system_random.uniform,
) -> Job | None:
    """Give the caller the next due job (of ``types``, when given), or None (``claim_many``
    for one job, for callers that wake nobody: the command line, benchmarks)."""
    claimed = claim_many(
        conn,
        actor,
        now=now,
        settings=settings,
        max_jobs=1,
        lease_seconds=lease_seconds,
        types=types,
        uniform=uniform,
    )
    return claimed.jobs[0] if claimed.jobs else None


def recover_expired(
    conn: Connection,
    *,
    now: datetime,
    settings: QueueSettings,
    limit: int,
    uniform: Uniform = _system_random.uniform,
) -> Changed[int]:
    """Turn expired leases into failed attempts: how many jobs were recovered."""
    recovered, effects = 0, NOTHING
    for job in edges_sql.expired_leases(conn, now, limit):
        run_at = finishing.retry_at(job, now=now, settings=settings, retry_in=None, uniform=uniform)
        moved = edges.lease_expired(conn, job, now=now, run_at=run_at, error=LEASE_EXPIRED)
        if moved.value is not None:
            recovered += 1
            effects |= moved.effects
    return Changed(recovered, effects)


def next_due_at(conn: Connection, now: datetime) -> datetime | None:
    """The earliest instant after ``now`` at which a job becomes claimable without any write:
    a pending job's ``run_at`` (scheduled, backing off) or a running job's lease end."""
    return due_sql.next_due_at(conn, now)
