"""The bulk use case's steps on both engines: the set is frozen when its count is checked, each
job is changed from the status it is in now if the selection still takes it (else skipped, never
half-changed), and delete never removes an unfinished job."""

from __future__ import annotations

from array import array
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask

from app.audit.actions import Origin
from app.infra import db
from app.queue.sql import bulk as bulk_sql
from app.queue.sql import jobs as jobs_sql
from app.queue.usecases import bulk, job_actions, reports
from app.queue.usecases.bulk import JobSet, Selection, Verb
from app.queue.vocabulary.jobs import Job, JobFilters
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue, make_queue

LATER = T0 + timedelta(seconds=5)


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def take(queue: Queue, verb: Verb, expect: int, **filters: Any) -> tuple[Selection, JobSet]:
    with db.read(queue.app) as conn:
        selection = Selection(verb, JobFilters(**filters))
        return selection, bulk.take(conn, queue.admin, selection, expect_count=expect, limit=100)


def apply(queue: Queue, taken: tuple[Selection, JobSet]) -> int:
    """Apply the set two jobs per transaction, as operation 7."""
    selection, job_set = taken
    changed = 0
    for batch in job_set.batches(2):
        with queue.tx() as conn:
            done = bulk.apply_batch(
                conn, queue.admin, selection, batch, operation=7, reason="why", now=LATER
            )
        assert done.busy == []  # nobody else holds these jobs
        changed += done.changed
    return changed


def failed_job(queue: Queue) -> Job:
    job = queue.enqueue(max_retries=0)
    assert queue.claim() is not None
    with queue.tx() as conn:
        return reports.fail(
            conn, queue.worker, job.id, now=T0, settings=queue.settings, error="x"
        ).value


def test_jobs_added_after_the_set_or_leaving_the_filter_are_left_alone(queue: Queue) -> None:
    jobs = [queue.enqueue() for _ in range(5)]
    taken = take(queue, Verb.CANCEL, 5, status="pending")
    late = queue.enqueue()
    claimed = queue.claim()  # pending -> running in between: the filter asked for pending
    assert claimed is not None and claimed.id == jobs[0].id
    assert apply(queue, taken) == 4
    assert queue.job(late.id).status == "pending"
    assert queue.job(claimed.id).status == "running"
    assert [e.kind for e in queue.events(claimed.id)] == ["enqueued", "claimed"]
    for job in jobs[1:]:
        assert queue.job(job.id).status == "cancelled"
        last = queue.events(job.id)[-1]
        assert (last.kind, last.from_status, last.note) == (
            "cancelled",
            "pending",
            "bulk operation 7: why",
        )


def test_a_job_claimed_meanwhile_is_cancelled_from_running_when_the_filter_still_takes_it(
    queue: Queue,
) -> None:
    first, second = queue.enqueue(), queue.enqueue()
    taken = take(queue, Verb.CANCEL, 2, type="email.send")
    claimed = queue.claim()
    assert claimed is not None and claimed.id == first.id
    assert apply(queue, taken) == 2
    for job in (first, second):
        assert queue.job(job.id).status == "cancelled"
    last = queue.events(first.id)[-1]
    assert (last.from_status, last.note) == ("running", "bulk operation 7: why")


def test_delete_never_removes_an_unfinished_job(queue: Queue) -> None:
    retried, reclaimed, done = (failed_job(queue) for _ in range(3))
    taken = take(queue, Verb.DELETE, 3)
    with queue.tx() as conn:
        job_actions.retry(conn, queue.admin, retried.id, now=T0, origin=Origin(queue.admin.name))
        job_actions.retry(conn, queue.admin, reclaimed.id, now=T0, origin=Origin(queue.admin.name))
    assert queue.claim() is not None  # the first retried job runs again
    assert apply(queue, taken) == 1
    assert queue.job(retried.id).status == "running"
    assert queue.job(reclaimed.id).status == "pending"
    with db.read(queue.app) as conn:
        assert jobs_sql.get_job(conn, done.id) is None


def test_the_delete_statement_restates_finished(queue: Queue) -> None:
    done, running = failed_job(queue), queue.enqueue()
    assert queue.claim() is not None
    pending = queue.enqueue()
    with queue.tx() as conn:  # even when handed unfinished ids, it deletes only finished jobs
        assert bulk_sql.delete_finished(conn, [pending.id, running.id, done.id]) == 1
    assert (queue.job(pending.id).status, queue.job(running.id).status) == ("pending", "running")


def test_retry_skips_a_job_retried_meanwhile(queue: Queue) -> None:
    first, second = failed_job(queue), failed_job(queue)
    taken = take(queue, Verb.RETRY, 2)
    with queue.tx() as conn:
        job_actions.retry(conn, queue.admin, first.id, now=T0, origin=Origin(queue.admin.name))
    assert apply(queue, taken) == 1
    assert [e.note for e in queue.events(first.id)][-1] is None  # only the single retry
    assert queue.events(second.id)[-1].note == "bulk operation 7: why"


def test_a_job_set_gives_back_its_ids_in_batches() -> None:
    found = JobSet(array("q", [3, 5, 9]))
    assert len(found) == 3
    assert list(found.batches(2)) == [[3, 5], [9]]
