"""The use cases in ``app.queue.service`` on both engines: who may call them, what a refused
worker call says, and that each leaves the history it should."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask import Flask
from sqlalchemy import select

from app.audit.actions import Origin
from app.queue.rules import policy
from app.queue.usecases import job_actions, reports
from app.queue.vocabulary.errors import (
    Conflict,
    NotFound,
    QueueError,
)
from app.queue.vocabulary.states import EventKind
from app.storage.schema import audit_events
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue, make_queue


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def _refusal(queue: Queue, actor_name: str, job_id: int, attempt: int | None = None) -> QueueError:
    actor = getattr(queue, actor_name)
    with pytest.raises(QueueError) as refused, queue.tx() as conn:
        reports.complete(conn, actor, job_id, now=T0, attempt=attempt)
    return refused.value


def test_enqueue_writes_its_event(queue: Queue, backend: str) -> None:
    job = queue.enqueue()
    assert [(e.kind, e.from_status, e.to_status) for e in queue.events(job.id)] == [
        (EventKind.ENQUEUED, None, "pending")
    ]


def test_use_cases_leave_the_role_question_to_the_door(
    queue: Queue, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The door asks the role table once per request (``tests/test_access.py``); a use case
    asks only what needs its job, so it never reads the table again."""

    def asked(*_: object) -> bool:
        raise AssertionError("a use case asked the role table")

    monkeypatch.setattr(policy, "role_allows", asked)
    job = queue.enqueue()
    claimed = queue.claim()
    assert claimed is not None and claimed.id == job.id
    with queue.tx() as conn:
        reports.heartbeat(conn, queue.worker, job.id, now=T0, settings=queue.settings)
        reports.fail(
            conn, queue.worker, job.id, now=T0, settings=queue.settings, error="x", retryable=False
        )
        job_actions.retry(conn, queue.admin, job.id, now=T0, origin=Origin("boss"))
        job_actions.cancel(conn, queue.producer, job.id, now=T0, origin=Origin("prod"))


def test_complete_refusals_say_why_only_to_those_who_see_the_job(
    queue: Queue, backend: str
) -> None:
    job = queue.enqueue()
    unknown = _refusal(queue, "worker", 424242)
    assert isinstance(unknown, NotFound) and unknown.detail == "job 424242 does not exist"
    # Nobody held it yet: no worker sees it, the admin does.
    assert _refusal(queue, "worker", job.id).detail == f"job {job.id} is not held by you"
    assert _refusal(queue, "admin", job.id).detail.endswith("(it is pending)")
    queue.claim(actor=queue.worker)
    assert _refusal(queue, "other_worker", job.id).detail == f"job {job.id} is not held by you"
    stale = _refusal(queue, "worker", job.id, attempt=2)
    assert isinstance(stale, Conflict) and "attempt 2 is stale" in stale.detail
    with queue.tx() as conn:
        job_actions.cancel(conn, queue.admin, job.id, now=T0, origin=Origin(queue.admin.name))
    assert "was cancelled" in _refusal(queue, "worker", job.id).detail  # it held it: it sees it
    assert _refusal(queue, "other_worker", job.id).detail == f"job {job.id} is not held by you"


def test_complete_is_one_compare_and_set_with_its_event(queue: Queue, backend: str) -> None:
    job = queue.enqueue()
    queue.claim()
    with queue.tx() as conn:
        done = reports.complete(
            conn, queue.worker, job.id, now=T0, result={"n": 1}, attempt=1
        ).value
    assert (done.status, done.result, done.progress) == ("completed", {"n": 1}, 100)
    assert [e.kind for e in queue.events(job.id)][-1] == EventKind.COMPLETED


def test_fail_picks_the_edge_by_the_retry_budget(queue: Queue, backend: str) -> None:
    job = queue.enqueue(max_retries=1)
    steps = [("pending", EventKind.RETRY_SCHEDULED), ("failed", EventKind.FAILED)]
    for hours, (expected, kind) in enumerate(steps, start=1):
        now = T0 + timedelta(hours=hours)  # past any backoff
        claimed = queue.claim(now=now)
        assert claimed is not None and claimed.id == job.id
        with queue.tx() as conn:
            failed = reports.fail(
                conn, queue.worker, job.id, now=now, settings=queue.settings, error="boom"
            ).value
        assert failed.status == expected
        assert queue.events(job.id)[-1].kind == kind


def test_cancel_and_retry_audit_as_their_origin_at_their_time(queue: Queue, backend: str) -> None:
    """No request, no wall clock: the audit row says who, from where and when the caller gave."""
    job = queue.enqueue()
    later = T0 + timedelta(days=3)
    who = Origin("prod", "198.51.100.7")
    with queue.tx() as conn:
        job_actions.cancel(conn, queue.producer, job.id, now=later, origin=who)
        job_actions.retry(conn, queue.admin, job.id, now=later, origin=Origin("boss"))
    with queue.tx() as conn:
        rows = conn.execute(
            select(audit_events.c.actor, audit_events.c.client_address, audit_events.c.at)
            .where(audit_events.c.target == f"job:{job.id}")
            .order_by(audit_events.c.id)
        ).all()
    assert [tuple(row) for row in rows] == [
        ("prod", "198.51.100.7", later),
        ("boss", None, later),
    ]
