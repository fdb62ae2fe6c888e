"""The hot moves (a batch's enqueue, a claim, a batch of reports, a heartbeat) write the same
events and keep the same figures on both engines; on PostgreSQL each is one statement that
writes its jobs' events and figures itself, and leaves the counters' triggers counting every
other statement of its transaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Connection

from app.audit.actions import Origin
from app.queue.contract.job_requests import EnqueueBody
from app.queue.usecases import claiming, enqueueing, job_actions, reports
from app.queue.usecases.finishing import NOT_RETRYABLE
from app.queue.vocabulary.jobs import Beat, Job, Outcome
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue, make_queue
from tests.queue.sql.test_counts import _exact
from tests.queue.sql.test_statement_counts import counted

LATER = T0 + timedelta(seconds=5)


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"BACKOFF_BASE_SECONDS": 0}


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def _enqueue_many(queue: Queue, conn: Connection, n: int) -> list[Job]:
    requests = [
        EnqueueBody.parse({"type": "email.send"}, queue.settings).to_request() for _ in range(n)
    ]
    batch = enqueueing.enqueue_many(conn, queue.producer, requests, now=T0).value
    return [job for job, _ in batch]


def _claim(queue: Queue, conn: Connection, n: int) -> list[Job]:
    return claiming.claim_many(conn, queue.worker, now=T0, settings=queue.settings, max_jobs=n).jobs


def _finish(queue: Queue, conn: Connection, held: list[Job]) -> None:
    done, retried, failed, beaten = held
    outcomes = [
        Outcome(done.id, 1, completed=True, result={"ok": 1}),
        Outcome(retried.id, 1, completed=False, error="boom"),
        Outcome(failed.id, 1, completed=False, error="bang", retryable=False),
    ]
    answers = reports.finish(conn, queue.worker, outcomes, now=LATER, settings=queue.settings)
    assert all(isinstance(answer, Job) for answer in answers.value), answers.value
    beat = reports.heartbeat_many(
        conn, queue.worker, [Beat(beaten.id, 1, 40, None)], now=LATER, settings=queue.settings
    )
    assert isinstance(beat.value[0], Job)


def test_the_hot_moves_write_the_same_events_on_both_engines(queue: Queue, backend: str) -> None:
    with queue.tx() as conn:
        _enqueue_many(queue, conn, 4)
    with queue.tx() as conn:
        held = sorted(_claim(queue, conn, 4), key=lambda job: job.id)
    with queue.tx() as conn:
        _finish(queue, conn, held)
    worker = queue.worker.name
    enqueued = ("enqueued", None, "pending", "svc-producer", None, None, None, T0)
    claimed = ("claimed", "pending", "running", worker, 1, None, None, T0)
    finished = [
        ("completed", "running", "completed", worker, 1, None, None, LATER),
        ("retry_scheduled", "running", "pending", worker, 1, "boom", None, LATER),
        ("failed", "running", "failed", worker, 1, "bang", NOT_RETRYABLE, LATER),
        None,  # a heartbeat writes no event
    ]
    for job, last in zip(held, finished, strict=True):
        events = [
            (e.kind, e.from_status, e.to_status, e.actor, e.attempt, e.error, e.note, e.at)
            for e in queue.events(job.id)
        ]
        assert events == [enqueued, claimed, *([last] if last else [])], job.id
    _exact(queue, LATER)


Step = Callable[[Queue, Connection], Any]
STEPS: dict[str, Step] = {
    "enqueue": lambda queue, conn: _enqueue_many(queue, conn, 3),
    "claim": lambda queue, conn: _claim(queue, conn, 3),
    "finish": lambda queue, conn: reports.finish(
        conn,
        queue.worker,
        [Outcome(job.id, 1, completed=True) for job in _claim(queue, conn, 3)],
        now=LATER,
        settings=queue.settings,
    ),
}


@pytest.mark.parametrize("backend", ["postgresql"])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_on_postgresql_a_hot_move_writes_its_events_in_its_own_statement(
    queue: Queue, backend: str, step: str
) -> None:
    with queue.tx() as conn:
        _enqueue_many(queue, conn, 3)
    with counted(queue.app) as sent, queue.tx() as conn:
        STEPS[step](queue, conn)
    assert not [s for s in sent if s.lstrip().startswith("INSERT INTO job_events")], sent
    _exact(queue, LATER)


def test_a_move_that_counted_itself_leaves_the_next_ones_to_the_triggers(
    queue: Queue, backend: str
) -> None:
    with queue.tx() as conn:
        first, second = _enqueue_many(queue, conn, 2)
    with queue.tx() as conn:  # a recorded claim, then moves the triggers count, in one go
        held = _claim(queue, conn, 2)
        assert len(held) == 2
        reports.release(conn, queue.worker, first.id, now=T0, attempt=1)
        job_actions.cancel(conn, queue.admin, second.id, now=T0, origin=Origin(queue.admin.name))
    _exact(queue, T0)
    with queue.tx() as conn:  # a recorded heartbeat, then a cancel the triggers count
        (job,) = _claim(queue, conn, 1)
        beat = reports.heartbeat_many(
            conn, queue.worker, [Beat(job.id, None, 10, None)], now=T0, settings=queue.settings
        )
        assert isinstance(beat.value[0], Job)
        job_actions.cancel(conn, queue.admin, job.id, now=T0, origin=Origin(queue.admin.name))
    _exact(queue, T0)
