"""The batch use cases: the single-job use cases of ``service`` applied to many items in the
caller's one transaction (enqueue all or nothing; finish and heartbeat answered per item)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from app.queue import service, uniqueness
from app.queue.errors import InvalidInput, QueueError
from app.queue.models import Actor, Beat, EnqueueRequest, Job, Outcome, QueueSettings
from app.queue.policy import Action, require

# The fields of a failed outcome; a completed one carries only ``result``.
_FAILURE_FIELDS = ("error", "retry_in", "retryable")


def _about_item(name: str, index: int, exc: QueueError) -> QueueError:
    """``exc`` raised by item ``index`` of the list ``name``, its fields and detail naming it."""
    where = f"{name}[{index}]"
    if isinstance(exc, InvalidInput):
        return InvalidInput({f"{where}.{key}": text for key, text in exc.errors.items()})
    return type(exc)(f"{where}: {exc.detail}")


def enqueue_many(
    conn: Connection, actor: Actor, requests: Sequence[EnqueueRequest], *, now: datetime
) -> list[tuple[Job, bool]]:
    """Enqueue every request in order, each as ``service.enqueue`` would (idempotency keys
    included); returns ``(job, created)`` per request. The first refused item raises, naming
    it (``jobs[3]``), and the caller's transaction rolls the others back."""
    actor = require(actor, Action.ENQUEUE)
    uniqueness.wait_for_turns(conn, actor.id, requests)  # every unique key, in one order
    added = []
    for index, request in enumerate(requests):
        try:
            added.append(service.enqueue(conn, actor, request, now=now))
        except QueueError as exc:
            raise _about_item("jobs", index, exc) from None
    return added


def _mismatch(outcome: Outcome) -> InvalidInput | None:
    """Why an outcome's fields do not fit its verdict, if they do not."""
    if outcome.completed:
        extra = [name for name in _FAILURE_FIELDS if getattr(outcome, name) is not None]
        if extra:
            return InvalidInput({name: "goes with a failed outcome" for name in extra})
        return None
    if outcome.error is None:
        return InvalidInput({"error": "is required for a failed outcome"})
    if outcome.result is not None:
        return InvalidInput({"result": "goes with a completed outcome"})
    return None


def _finish_one(
    conn: Connection,
    actor: Actor,
    outcome: Outcome,
    *,
    now: datetime,
    settings: QueueSettings,
) -> Job:
    """One outcome, through the single complete or fail use case."""
    if (mismatch := _mismatch(outcome)) is not None:
        raise mismatch
    if outcome.completed:
        return service.complete(
            conn, actor, outcome.job_id, now=now, result=outcome.result, attempt=outcome.attempt
        )
    assert outcome.error is not None  # _mismatch refused a failure without one
    return service.fail(
        conn,
        actor,
        outcome.job_id,
        now=now,
        settings=settings,
        error=outcome.error,
        attempt=outcome.attempt,
        retry_in=outcome.retry_in,
        retryable=True if outcome.retryable is None else outcome.retryable,
    )


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
    answers: list[Job | QueueError] = []
    for outcome in outcomes:
        try:
            answers.append(_finish_one(conn, actor, outcome, now=now, settings=settings))
        except QueueError as exc:
            answers.append(exc)
    return answers


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
    answers: list[Job | QueueError] = []
    for beat in beats:
        try:
            answers.append(
                service.heartbeat(
                    conn,
                    actor,
                    beat.job_id,
                    now=now,
                    settings=settings,
                    progress=beat.progress,
                    message=beat.message,
                    attempt=beat.attempt,
                )
            )
        except QueueError as exc:
            answers.append(exc)
    return answers
