"""Two transactions on the same database (a SQLite file, then PostgreSQL), started at the same
instant from two threads:
exactly one transition wins, and the state and the event log agree with the winner."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from app.audit.actions import Origin
from app.infra import db
from app.queue.contract.job_requests import EnqueueBody
from app.queue.usecases import claiming, enqueueing, job_actions, reports
from app.queue.vocabulary.errors import Conflict
from app.queue.vocabulary.jobs import Job
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue

ROUNDS = 25


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"LEASE_SECONDS": 5, "BACKOFF_BASE_SECONDS": 0}


def _race(queue: Queue, *actions: Callable[[Any], Any]) -> list[Any]:
    """Run each action in its own thread and transaction, released together by a barrier."""
    barrier = threading.Barrier(len(actions), timeout=10)

    def run(action: Callable[[Any], Any]) -> Any:
        barrier.wait()
        try:
            with queue.tx() as conn:
                return action(conn)
        except Conflict as exc:
            return exc

    with ThreadPoolExecutor(len(actions)) as pool:
        futures = [pool.submit(run, action) for action in actions]
        return [future.result(timeout=30) for future in futures]


def test_complete_vs_fail_same_job_one_winner(queue: Queue, backend: str) -> None:
    outcomes: Counter[str] = Counter()
    for _ in range(ROUNDS):
        job = queue.enqueue(max_retries=1)
        claimed = queue.claim()
        assert claimed is not None and claimed.id == job.id
        now = T0 + timedelta(seconds=1)
        done, failed = _race(
            queue,
            lambda conn, j=job, now=now: (
                reports.complete(
                    conn, queue.worker, j.id, now=now, attempt=1, result={"ok": True}
                ).value
            ),
            lambda conn, j=job, now=now: (
                reports.fail(
                    conn, queue.worker, j.id, now=now, settings=queue.settings, error="x", attempt=1
                ).value
            ),
        )
        winners = [r for r in (done, failed) if not isinstance(r, Conflict)]
        assert len(winners) == 1, (done, failed)
        final = queue.job(job.id)
        kinds = [e.kind for e in queue.events(job.id)]
        if isinstance(failed, Conflict):
            outcomes["complete won"] += 1
            assert (final.status, final.result, final.retry_count) == ("completed", {"ok": True}, 0)
            assert kinds == ["enqueued", "claimed", "completed"]
        else:
            outcomes["fail won"] += 1
            assert (final.status, final.result, final.retry_count) == ("pending", None, 1)
            assert kinds == ["enqueued", "claimed", "retry_scheduled"]
            # a pending job must not be left in the queue for the next round
            with queue.tx() as conn:
                job_actions.cancel(
                    conn, queue.admin, job.id, now=now, origin=Origin(queue.admin.name)
                )
    print(f"\ncomplete vs fail, {ROUNDS} races on one {backend} database: {dict(outcomes)}")


def test_reaper_vs_late_complete_same_job_one_winner(queue: Queue, backend: str) -> None:
    """The lease ran out but nobody re-claimed yet: the late complete and the reaper race."""
    outcomes: Counter[str] = Counter()
    for _ in range(ROUNDS):
        job = queue.enqueue(max_retries=1)
        claimed = queue.claim()
        assert claimed is not None and claimed.id == job.id
        late = claimed.lease_expires_at + timedelta(seconds=1)  # type: ignore[operator]
        recovered, done = _race(
            queue,
            lambda conn, late=late: (
                claiming.recover_expired(conn, now=late, settings=queue.settings, limit=100).value
            ),
            lambda conn, j=job, late=late: (
                reports.complete(conn, queue.worker, j.id, now=late, attempt=1).value
            ),
        )
        final = queue.job(job.id)
        events = queue.events(job.id)
        kinds = [e.kind for e in events]
        assert events[-1].to_status == final.status
        if isinstance(done, Conflict):
            outcomes["reaper won"] += 1
            assert recovered == 1
            assert (final.status, final.retry_count, final.worker_id) == ("pending", 1, None)
            assert final.error == claiming.LEASE_EXPIRED
            assert kinds == ["enqueued", "claimed", "lease_expired"]
            with queue.tx() as conn:
                job_actions.cancel(
                    conn, queue.admin, job.id, now=late, origin=Origin(queue.admin.name)
                )
        else:
            outcomes["late complete won"] += 1
            assert recovered == 0
            assert (final.status, final.retry_count) == ("completed", 0)
            assert kinds == ["enqueued", "claimed", "completed"]
    print(f"\nreaper vs late complete, {ROUNDS} races on one {backend} database: {dict(outcomes)}")


def test_two_claims_never_take_the_same_job(queue: Queue) -> None:
    jobs = [queue.enqueue() for _ in range(ROUNDS)]
    taken: list[int] = []
    for _ in range(ROUNDS // 2 + 1):
        first, second = _race(
            queue,
            lambda conn: claiming.claim(conn, queue.worker, now=T0, settings=queue.settings),
            lambda conn: claiming.claim(conn, queue.other_worker, now=T0, settings=queue.settings),
        )
        taken += [job.id for job in (first, second) if job is not None]
    assert sorted(taken) == [job.id for job in jobs]


def _blocked_on_a_lock(queue: Queue, backend: str) -> None:
    """Wait (bounded) until another transaction waits for a lock (PostgreSQL; SQLite's second
    writer waits in BEGIN, which needs no proof)."""
    deadline = time.monotonic() + 10
    while backend == "postgresql" and time.monotonic() < deadline:
        with db.read(queue.app) as conn:
            if conn.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar():
                return
        time.sleep(0.01)
    time.sleep(0.2)


def test_a_batch_that_collides_on_a_key_answers_the_winner(queue: Queue, backend: str) -> None:
    """The batch looked the key up before the single enqueue committed it: its insert collides,
    and the batch is redone item by item, replaying the winner."""
    keyed = EnqueueBody.parse({"type": "email.send", "idempotency_key": "k"}, queue.settings)
    other = EnqueueBody.parse({"type": "email.send"}, queue.settings)
    batch = [keyed.to_request(), other.to_request()]
    with ThreadPoolExecutor(1) as pool, queue.tx() as conn:
        winner, _ = enqueueing.enqueue(conn, queue.producer, keyed.to_request(), now=T0).value

        def enqueue_batch() -> list[tuple[Job, bool]]:
            with queue.tx() as batch_conn:
                return enqueueing.enqueue_many(batch_conn, queue.producer, batch, now=T0).value

        answer = pool.submit(enqueue_batch)
        _blocked_on_a_lock(queue, backend)
    (replayed, created), (new, new_created) = answer.result(timeout=30)
    assert (replayed.id, created) == (winner.id, False)
    assert new_created and new.id != winner.id
    assert [e.kind for e in queue.events(winner.id)] == ["enqueued"]
