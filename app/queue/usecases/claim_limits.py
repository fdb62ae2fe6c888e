"""Claims under per-type flow control: a paused type is never handed out, and a limited type
never beyond its ``max_running`` or its ``rate_limit``, however many claims run at once.

Claims of a limited type count after taking its turn: the claim locks the type's
``type_claim_windows`` row first (where writers run at once; where they write one at a time the
transaction is already alone), so the running count and the window it reads cannot change
until it commits. A type's limits per partition are counted under the same turn
(``partition_limits``). With nothing limited or paused a claim is the plain claim plus one
driver-level read of the (small) overrides table.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection

from app.queue.rules import type_limits
from app.queue.rules.settings import QueueSettings
from app.queue.rules.type_limits import TypeLimits
from app.queue.sql import counts as counts_sql
from app.queue.sql import type_limits as type_limits_sql
from app.queue.sql.edges import TypeLeases
from app.queue.usecases.partition_limits import RECHECK, PartitionClaims
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.limits import Window


@dataclass(frozen=True)
class TypeTurn:
    """What a claim read about one limited type while holding its turn."""

    limits: TypeLimits
    window: Window | None
    running: int

    def claims_in_window(self, now: datetime) -> int:
        rate = self.limits.rate_limit
        return 0 if rate is None else type_limits.window_claims(rate, self.window, now)

    def allowance(self, now: datetime) -> int:
        """How many of its jobs this claim may hand out."""
        return type_limits.allowance(
            self.limits, running=self.running, claims_in_window=self.claims_in_window(now)
        )

    def next_chance(self, now: datetime) -> datetime:
        """When a claim held back by this type's limits may succeed: the next rate window when
        this one is full, else soon (a running job may finish any time)."""
        rate = self.limits.rate_limit
        if rate is not None and self.claims_in_window(now) >= rate.count:
            return rate.window_start(now) + timedelta(seconds=rate.seconds)
        return now + RECHECK


def _limits_now(
    conn: Connection, settings: QueueSettings
) -> tuple[dict[str, TypeLimits], TypeLeases, bool]:
    """The types that are limited or paused right now, the run limits of the types that
    have one (configuration merged with overrides), and whether partitioned jobs are
    claimable (the same read tells)."""
    overrides, partitioned = type_limits_sql.claim_overrides(conn)
    limits = type_limits.effective_all(settings.flow, overrides)
    return limits, type_limits.run_limits(settings.flow, overrides), partitioned


def _take_turns(conn: Connection, limits: dict[str, TypeLimits]) -> dict[str, TypeTurn]:
    """Lock the claim windows of the limited types in ``limits`` (a paused one needs no turn),
    then count what runs of each type with a max_running."""
    counted = {name: limit for name, limit in limits.items() if limit.limited and not limit.paused}
    windows = type_limits_sql.lock_windows(conn, counted)
    capped = [name for name, limit in counted.items() if limit.max_running is not None]
    running = counts_sql.running_of_types(conn, capped)
    return {
        name: TypeTurn(limit, windows.get(name), running.get(name, 0))
        for name, limit in counted.items()
    }


def claim_within_limits(
    conn: Connection,
    *,
    settings: QueueSettings,
    worker: str,
    now: datetime,
    lease_seconds: int,
    limit: int,
    types: tuple[str, ...] | None,
    type_leases: TypeLeases,
) -> tuple[list[Job], datetime | None]:
    """``edges.claim`` within every type's limits: up to ``limit`` jobs in claim order,
    none of a paused type, and of each limited type no more than it may still run now; and
    when it found nothing because limits held due jobs back, when to look again."""

    def claim_step(
        limit: int, types: tuple[str, ...] | None, except_types: tuple[str, ...] = ()
    ) -> list[Job]:
        return partitioned.claim(
            conn, limit=limit, types=types, except_types=except_types, **options
        )

    limits, run_limits, fair = _limits_now(conn, settings)
    options = {"worker": worker, "now": now, "lease_seconds": lease_seconds, "fair": fair}
    options |= {"type_leases": type_leases, "run_limits": run_limits}
    if types is not None:
        limits = {name: limit for name, limit in limits.items() if name in types}
    partitioned = PartitionClaims({})
    if not limits:  # the common case
        return claim_step(limit, types), None
    turns = _take_turns(conn, limits)
    partitioned = PartitionClaims.read(conn, limits, now)
    paused = {name for name, limit in limits.items() if limit.paused}
    caps = {name: turn.allowance(now) for name, turn in turns.items()}
    blocked = paused | {name for name, cap in caps.items() if cap == 0}
    claimed: list[Job] = []
    while len(claimed) < limit:
        allowed = None if types is None else tuple(t for t in types if t not in blocked)
        if allowed == ():
            break
        # A step hands out no more than the smallest allowance left, so no type passes its
        # own; each step takes the head of what is still allowed, so the steps stay in claim
        # order. At most ``limit`` steps, usually one.
        step = min([limit - len(claimed), *(caps[n] for n in caps if n not in blocked)])
        batch = claim_step(step, allowed, tuple(sorted(blocked)) if allowed is None else ())
        claimed += batch
        for job in batch:
            if job.type in caps:
                caps[job.type] -= 1
                if caps[job.type] == 0:
                    blocked.add(job.type)
        if len(batch) < step:
            break
    _count_claims(conn, turns, partitioned, claimed, now)
    held_back = None if claimed else _held_back_until(conn, turns, blocked - paused, now)
    return claimed, None if claimed else _earliest(held_back, partitioned.held_until(now))


def _earliest(*times: datetime | None) -> datetime | None:
    return min((at for at in times if at is not None), default=None)


def _count_claims(
    conn: Connection,
    turns: dict[str, TypeTurn],
    partitioned: PartitionClaims,
    claimed: list[Job],
    now: datetime,
) -> None:
    """Add this claim's jobs to the rate windows of their types and partitions."""
    partitioned.count(conn, now)
    taken = Counter(job.type for job in claimed)
    for name, turn in turns.items():
        rate = turn.limits.rate_limit
        if rate is not None and taken[name]:
            type_limits_sql.count_claims(
                conn,
                name,
                started_at=rate.window_start(now),
                claims=turn.claims_in_window(now) + taken[name],
            )


def _held_back_until(
    conn: Connection, turns: dict[str, TypeTurn], held: set[str], now: datetime
) -> datetime | None:
    """When to look again, when due jobs wait only for their type's limits (else None)."""
    if held and type_limits_sql.any_due(conn, held, now):
        return min(turns[name].next_chance(now) for name in held)
    return None
