"""The figures the database keeps (migration 0009's triggers) stay exact through every edge of
the state graph, batches and pruning, on both engines; dashboards and worker lists read them."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import DatabaseError

from app.audit.actions import Origin
from app.infra import db
from app.queue.contract.job_requests import EnqueueBody
from app.queue.sql import counts as counts_sql
from app.queue.usecases import (
    claiming,
    enqueueing,
    job_actions,
    listing,
    reports,
    stats,
)
from app.queue.vocabulary.jobs import JobFilters, Keyset
from app.storage.schema_figures import job_counts
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue, make_queue
from tests.recount import assert_exact


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"LEASE_SECONDS": 10, "BACKOFF_BASE_SECONDS": 0}


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def _exact(queue: Queue, end: Any) -> None:
    with db.read(queue.app) as conn:
        assert_exact(conn, end)


def test_every_edge_keeps_the_counts_exact(queue: Queue, backend: str) -> None:
    at = [T0 + timedelta(seconds=i * 7) for i in range(40)]
    first = [queue.enqueue(now=at[0], priority=p) for p in ("low", "medium", "low")]
    queue.enqueue(now=at[0], actor=queue.admin, type="report.build", priority="critical")
    with queue.tx() as conn:
        requests = [
            EnqueueBody.parse({"type": "webhook.deliver"}, queue.settings).to_request()
            for _ in range(2)
        ]
        enqueueing.enqueue_many(conn, queue.producer, requests, now=at[1])
    _exact(queue, at[1])
    with queue.tx() as conn:
        held = claiming.claim_many(
            conn, queue.worker, now=at[2], settings=queue.settings, max_jobs=2
        ).jobs
    _exact(queue, at[2])
    with queue.tx() as conn:
        reports.complete(conn, queue.worker, held[0].id, now=at[3])
        reports.fail(conn, queue.worker, held[1].id, now=at[3], settings=queue.settings, error="x")
    _exact(queue, at[3])
    again = queue.claim(now=at[4], actor=queue.other_worker)  # a second holder of a retried job
    assert again is not None
    with queue.tx() as conn:
        reports.fail(
            conn, queue.other_worker, again.id, now=at[5], settings=queue.settings,
            error="x", retryable=False,
        )  # fmt: skip
    _exact(queue, at[5])
    lapsed = queue.claim(now=at[6])
    assert lapsed is not None
    with queue.tx() as conn:  # its lease runs out: recovered as a failed attempt
        assert (
            claiming.recover_expired(conn, now=at[9], settings=queue.settings, limit=10).value == 1
        )
    released = queue.claim(now=at[10])
    assert released is not None
    with queue.tx() as conn:
        reports.release(conn, queue.worker, released.id, now=at[11], attempt=released.attempts)
        job_actions.cancel(
            conn, queue.producer, first[2].id, now=at[12], origin=Origin(queue.producer.name)
        )
    running = queue.claim(now=at[13], actor=queue.other_worker)
    assert running is not None
    with queue.tx() as conn:
        job_actions.cancel(
            conn, queue.admin, running.id, now=at[14], origin=Origin(queue.admin.name)
        )
        job_actions.retry(conn, queue.admin, again.id, now=at[15], origin=Origin(queue.admin.name))
        job_actions.retry(
            conn, queue.admin, first[2].id, now=at[15], origin=Origin(queue.admin.name)
        )
    _exact(queue, at[15])
    with queue.tx() as conn:  # a new holder of a job that failed sees that failure too
        taken = claiming.claim_many(
            conn, queue.admin, now=at[16], settings=queue.settings, max_jobs=20
        ).jobs
    assert again.id in {job.id for job in taken}
    _exact(queue, at[16])
    with db.read(queue.app) as conn:
        kinds = conn.execute(text("SELECT DISTINCT kind FROM job_events")).scalars().all()
    assert set(kinds) >= {
        "enqueued", "claimed", "completed", "retry_scheduled", "failed", "lease_expired",
        "released", "cancelled", "retried",
    }  # fmt: skip
    later = at[39] + timedelta(hours=2)  # a prune keeps the counts; the window moved past
    with queue.tx() as conn:
        assert job_actions.prune(conn, finished_before=later, batch=100) >= 2
    _exact(queue, later)


def test_dashboards_read_the_counts_of_their_scope(queue: Queue, backend: str) -> None:
    queue.enqueue(priority="medium")
    queue.enqueue(actor=queue.admin)
    job = queue.claim()
    assert job is not None
    with queue.tx() as conn:
        reports.fail(conn, queue.worker, job.id, now=T0, settings=queue.settings, error="x")
    with db.read(queue.app) as conn:
        figures = {
            actor.role: stats.dashboard(conn, actor, now=T0 + timedelta(seconds=30))
            for actor in (queue.producer, queue.worker, queue.admin)
        }
    assert figures["producer"].by_status["pending"] == 1
    assert figures["admin"].by_status["pending"] == 2
    # The worker held the job, which is pending again after its failed attempt.
    assert figures["worker"].by_status == {
        "pending": 1, "running": 0, "completed": 0, "failed": 0, "cancelled": 0,
    }  # fmt: skip
    assert figures["worker"].oldest_pending_age is not None  # its own retry is due
    assert sum(figures["admin"].by_priority.values()) == 2


def _ids(page: Any) -> list[int]:
    return [job.id for job in page.jobs]


def test_a_worker_lists_through_its_holder_rows(queue: Queue, backend: str) -> None:
    jobs = [queue.enqueue() for _ in range(7)]
    claimed = [queue.claim() for _ in range(5)]
    assert all(claimed)
    queue.claim(actor=queue.other_worker)
    with queue.tx() as conn:
        for job in claimed[:3]:
            assert job is not None
            reports.complete(conn, queue.worker, job.id, now=T0)
    with db.read(queue.app) as conn:
        everything = listing.page(conn, queue.worker, JobFilters(limit=50))
        done = listing.page(conn, queue.worker, JobFilters(limit=50, status="completed"))
        first = listing.page(conn, queue.worker, JobFilters(limit=2))
        older = listing.page(
            conn, queue.worker, JobFilters(limit=2, cursor=Keyset("before", (first.jobs[-1].id,)))
        )
        newer = listing.page(
            conn, queue.worker, JobFilters(limit=2, cursor=Keyset("after", (older.jobs[0].id,)))
        )
    mine = sorted((job.id for job in claimed if job), reverse=True)
    assert _ids(everything) == mine and jobs[6].id not in mine
    assert _ids(done) == sorted((job.id for job in claimed[:3] if job), reverse=True)
    assert _ids(first) + _ids(older) == mine[:4]
    assert _ids(newer) == _ids(first)


def _counted_shards(conn: Connection) -> set[int]:
    return set(conn.execute(select(job_counts.c.shard).where(job_counts.c.scope == "*")).scalars())


@pytest.mark.pg
@pytest.mark.parametrize("backend", ["postgresql"])
def test_concurrent_writers_never_wait_on_a_counter_row(queue: Queue, backend: str) -> None:
    """A transaction that counted a job and has not committed yet does not hold up another
    writer counting the same key: each transaction adds to a shard of its own."""
    counted, release = threading.Event(), threading.Event()

    def slow() -> None:
        with queue.tx() as conn:
            enqueueing.enqueue(conn, queue.producer, _request(queue), now=T0)
            counted.set()
            release.wait(30)

    writer = threading.Thread(target=slow)
    writer.start()
    try:
        assert counted.wait(30)
        with queue.tx() as conn:  # fails at once if it has to wait on the open transaction
            conn.execute(text("SET LOCAL lock_timeout = '5s'"))
            enqueueing.enqueue(conn, queue.producer, _request(queue), now=T0)
    finally:
        release.set()
        writer.join(30)
    with db.read(queue.app) as conn:
        assert len(_counted_shards(conn)) == 2
        assert dict(
            (status, n) for status, _, n in counts_sql.counts(conn, counts_sql.EVERYONE)
        ) == {"pending": 2}
        assert_exact(conn, T0)


def _request(queue: Queue) -> Any:
    return EnqueueBody.parse({"type": "email.send"}, queue.settings).to_request()


def test_a_jobs_type_priority_and_owner_never_change(queue: Queue, backend: str) -> None:
    """The counts rely on it, so the database refuses it, whoever asks."""
    job = queue.enqueue()
    for change in ("priority = 30", "type = 'report.build'", f"created_by = {queue.admin.id}"):
        with pytest.raises(DatabaseError, match="never change"), queue.tx() as conn:
            conn.execute(text(f"UPDATE jobs SET {change} WHERE id = :id"), {"id": job.id})  # noqa: S608
    with db.read(queue.app) as conn:
        assert_exact(conn, T0)
