"""A worker's reports on the jobs it holds, one job or a batch: complete, fail, heartbeat,
release (the rules are ``finishing``'s, for one report or many)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from app.queue.rules import edges
from app.queue.rules.backoff import Uniform
from app.queue.rules.settings import QueueSettings
from app.queue.rules.visibility import visibility
from app.queue.sql import batches as batches_sql
from app.queue.usecases import attempt_logs, finishing
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Changed
from app.queue.vocabulary.errors import (
    QueueError,
)
from app.queue.vocabulary.jobs import Beat, Job, Outcome

_system_random = random.SystemRandom()


def _only(reported: Changed[list[Job | QueueError]]) -> Changed[Job]:
    """The one report's job, or its refusal raised (after what the report changed)."""
    (answer,) = reported.value
    if isinstance(answer, QueueError):
        answer.effects = reported.effects  # a refusal that keeps its transaction tells them
        raise answer
    return Changed(answer, reported.effects)


def heartbeat(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    settings: QueueSettings,
    progress: int | None = None,
    message: str | None = None,
    attempt: int | None = None,
) -> Changed[Job]:
    """Extend the caller's lease by the length it was claimed with, and record progress."""
    beat = Beat(job_id, attempt, progress, message)
    return _only(finishing.heartbeat(conn, actor, [beat], now=now, settings=settings))


def complete(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    result: dict[str, object] | None = None,
    attempt: int | None = None,
    settings: QueueSettings | None = None,
) -> Changed[Job]:
    """Finish the caller's job successfully (``settings``: the backoff of an attempt that ran
    past its deadline, which is timed out instead)."""
    outcome = Outcome(job_id, attempt, completed=True, result=result)
    return _only(finishing.finish(conn, actor, [outcome], now=now, settings=settings))


def fail(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    settings: QueueSettings,
    error: str,
    attempt: int | None = None,
    retry_in: float | None = None,
    retryable: bool = True,
    uniform: Uniform = _system_random.uniform,
) -> Changed[Job]:
    """Record a failed attempt: back to pending after backoff while retries remain, else failed."""
    outcome = Outcome(
        job_id,
        attempt,
        completed=False,
        error=error,
        retry_in=retry_in,
        retryable=retryable,
    )
    return _only(
        finishing.finish(
            conn,
            actor,
            [outcome],
            now=now,
            settings=settings,
            uniform=uniform,
        )
    )


def release(
    conn: Connection, actor: Actor, job_id: int, *, now: datetime, attempt: int
) -> Changed[Job]:
    """Hand the caller's job back unstarted: pending again at once, no retry spent."""
    done = edges.release(conn, job_id, worker=actor.name, attempt=attempt, now=now)
    if done.value is None:
        found = batches_sql.jobs_by_ids(conn, {job_id}, visibility(actor))
        raise finishing.refusal(actor, job_id, attempt, found)
    return Changed(done.value, done.effects)


def finish(
    conn: Connection,
    actor: Actor,
    outcomes: Sequence[Outcome],
    *,
    now: datetime,
    settings: QueueSettings,
) -> Changed[list[Job | QueueError]]:
    """Apply each outcome as the single complete or fail route would; per outcome, the job it
    left or the refusal (a refused item changes nothing, the others still apply). The lines an
    outcome carries go to its attempt's log when it lands."""
    done = finishing.finish(conn, actor, outcomes, now=now, settings=settings)
    attempt_logs.carry(conn, list(zip(outcomes, done.value, strict=True)), now=now)
    return done


def heartbeat_many(
    conn: Connection,
    actor: Actor,
    beats: Sequence[Beat],
    *,
    now: datetime,
    settings: QueueSettings,
) -> Changed[list[Job | QueueError]]:
    """Apply each heartbeat as the single heartbeat route would; per beat, the job with its
    extended lease or the refusal (a cancelled job's refusal says so). The lines a beat carries
    go to its attempt's log when it lands."""
    done = finishing.heartbeat(conn, actor, beats, now=now, settings=settings)
    attempt_logs.carry(conn, list(zip(beats, done.value, strict=True)), now=now)
    return done
