"""The store's SQL on both engines: inserts with their event, visibility conditions, the
compare-and-set primitive the named transitions are built on, and deletes that take a job's
events with it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask import Flask
from sqlalchemy import delete, select

from app.infra import db
from app.queue.rules import edges
from app.queue.sql import batches as batches_sql
from app.queue.sql import bulk as bulk_sql
from app.queue.sql import due as due_sql
from app.queue.sql import edges as edges_sql
from app.queue.sql import jobs as jobs_sql
from app.queue.vocabulary.states import EventKind, JobStatus
from app.storage.schema import job_events, jobs
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue, make_queue


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def test_insert_job_records_enqueued_and_refuses_a_repeated_key(queue: Queue, backend: str) -> None:
    job = queue.enqueue(idempotency_key="k-1")
    assert [e.kind for e in queue.events(job.id)] == [EventKind.ENQUEUED]
    values = {
        "type": "email.send", "payload": {}, "priority": 10, "max_retries": 3,
        "idempotency_key": "k-1", "created_by": queue.producer.id, "run_at": T0,
        "created_at": T0, "updated_at": T0,
    }  # fmt: skip
    with queue.tx() as conn:
        assert jobs_sql.insert_job(conn, values, actor="svc-producer") is None


def test_a_worker_sees_what_it_holds_or_held(queue: Queue, backend: str) -> None:
    held, never = queue.enqueue(), queue.enqueue()
    queue.claim()
    with db.read(queue.app) as conn:
        mine = jobs_sql.Viewer(holder=queue.worker.name)
        theirs = jobs_sql.Viewer(holder=queue.other_worker.name)
        assert jobs_sql.get_visible_job(conn, held.id, mine) is not None
        assert jobs_sql.get_visible_job(conn, never.id, mine) is None
        assert jobs_sql.get_visible_job(conn, held.id, theirs) is None
        assert jobs_sql.get_visible_job(conn, never.id, jobs_sql.Viewer(owner=queue.producer.id))


@pytest.mark.parametrize("locked", [False, True])
def test_jobs_by_ids_reads_the_same_jobs_with_or_without_a_viewer(
    queue: Queue, backend: str, locked: bool
) -> None:
    """Without a viewer the read is the prepared statement; with one, the general query.
    Both find the same jobs, leave out missing ids, and say which jobs the viewer sees."""
    held, never = queue.enqueue(), queue.enqueue()
    queue.claim()
    ids = {held.id, never.id, never.id + 1000}
    mine = jobs_sql.Viewer(holder=queue.worker.name).condition()
    with queue.tx() as conn:
        everyone = batches_sql.jobs_by_ids(conn, ids, None, locked=locked)
        worker = batches_sql.jobs_by_ids(conn, ids, mine, locked=locked)
    assert {i: v for i, (_, v) in everyone.items()} == {held.id: True, never.id: True}
    assert {i: v for i, (_, v) in worker.items()} == {held.id: True, never.id: False}
    assert everyone[held.id][0] == worker[held.id][0]
    assert everyone[held.id][0].status == JobStatus.RUNNING
    assert everyone[never.id][0].status == JobStatus.PENDING


def test_move_is_a_compare_and_set(queue: Queue, backend: str) -> None:
    job = queue.enqueue()
    later = T0 + timedelta(seconds=1)
    with queue.tx() as conn:
        lost = edges_sql.move(
            conn, job.id, sources={JobStatus.RUNNING}, expect={}, values={"progress": 5},
            at=later, kind=None,
        )  # fmt: skip
        assert lost is None
        won = edges_sql.move(
            conn, job.id, sources={JobStatus.PENDING}, expect={"attempts": 0},
            values={"status": JobStatus.CANCELLED, "finished_at": later}, at=later,
            kind=EventKind.CANCELLED, actor="svc-admin",
        )  # fmt: skip
        assert won is not None and won.status == "cancelled" and won.updated_at == later
        with pytest.raises(ValueError, match="pin"):
            edges_sql.move(
                conn, job.id, sources={JobStatus.FAILED, JobStatus.CANCELLED}, expect={},
                values={}, at=later, kind=EventKind.RETRIED,
            )  # fmt: skip
    kinds = [(e.kind, e.from_status, e.actor) for e in queue.events(job.id)]
    assert kinds[-1] == (EventKind.CANCELLED, "pending", "svc-admin") and len(kinds) == 2


def test_the_oldest_and_next_due_run_at_are_found_in_any_priority(
    queue: Queue, backend: str
) -> None:
    """One probe of the claim index per priority (no index of run_at alone): the oldest due job
    is a low one behind a critical one, the next scheduled a medium one before a high one."""
    later = {"medium": T0 + timedelta(hours=1), "high": T0 + timedelta(hours=2)}
    admin = queue.admin  # may enqueue at any priority
    queue.enqueue(now=T0, actor=admin, priority="low")
    queue.enqueue(now=T0 + timedelta(seconds=10), actor=admin, priority="critical")
    for priority, run_at in later.items():
        queue.enqueue(now=T0, actor=admin, priority=priority, run_at=run_at.isoformat())
    now = T0 + timedelta(minutes=1)
    with queue.app.app_context(), db.read(queue.app) as conn:
        assert jobs_sql.oldest_pending_run_at(conn, now, None) == T0
        assert due_sql.next_due_at(conn, now) == later["medium"]
        assert due_sql.next_due_at(conn, later["high"]) is None


def test_the_next_due_instant_passes_over_jobs_due_when_written(queue: Queue, backend: str) -> None:
    """A job enqueued for now just after a look began is due after that look's ``now``, but its
    commit announced it: only jobs written to become due later (scheduled, backing off) are
    made due by the clock, so only they set a waiting claim's alarm."""
    look_began = T0
    due_now = queue.enqueue(now=T0 + timedelta(milliseconds=3))
    with queue.app.app_context(), db.read(queue.app) as conn:
        assert due_sql.next_due_at(conn, look_began) is None
    later = T0 + timedelta(minutes=5)
    queue.enqueue(now=T0 + timedelta(milliseconds=4), run_at=later.isoformat())
    with queue.app.app_context(), db.read(queue.app) as conn:
        assert due_sql.next_due_at(conn, look_began) == later
    claimed = queue.claim(now=T0 + timedelta(seconds=1))
    assert claimed is not None and claimed.id == due_now.id
    failed_at = T0 + timedelta(seconds=2)
    queue.fail(claimed.id, now=failed_at, retry_in=30)
    with queue.app.app_context(), db.read(queue.app) as conn:
        assert due_sql.next_due_at(conn, look_began) == failed_at + timedelta(seconds=30)


def test_a_jobs_events_go_with_it_however_it_is_deleted(queue: Queue, backend: str) -> None:
    done = [queue.enqueue() for _ in range(3)]
    kept = queue.enqueue()
    for job in done:
        with queue.tx() as conn:
            edges.cancel(conn, job, now=T0, actor="svc-admin")
    with queue.tx() as conn:
        assert bulk_sql.delete_finished(conn, [done[0].id]) == 1  # the bulk action's DELETE
        conn.execute(delete(jobs).where(jobs.c.id.in_([done[1].id, done[2].id])))  # any other
        left = conn.execute(select(job_events.c.job_id).distinct()).scalars().all()
    assert left == [kept.id]
