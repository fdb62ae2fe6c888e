"""A bulk cancel, then a bulk retry, racing with worker threads that claim and release or
complete jobs through the service at the same time (a SQLite file, then PostgreSQL): every job
ends in one consistent state, its status agrees with its last event, its history is one chain,
and nothing is lost or done twice."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import select, text

from app.audit.actions import Origin
from app.infra import db
from app.queue.usecases import bulk, bulk_runs, claiming, reports
from app.queue.usecases.bulk import Selection, Verb
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import Conflict
from app.queue.vocabulary.jobs import JobFilters
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import jobs as jobs_table
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_user
from tests.harness import Queue

CHURNING = 40  # email.send jobs: claimed and released over and over (always pending or running)
FINISHING = 20  # report.build jobs: claimed and completed (outside the cancel's filter)
DEADLINE = 60.0
LOCK_WAITERS = text(
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"BULK_BATCH_SIZE": 4}


def work(queue: Queue, actor: Actor, stop: threading.Event, tally: Counter[str]) -> None:
    """Claim a job; release an email, complete a report; until told to stop."""
    while not stop.is_set():
        with queue.tx() as conn:
            job = claiming.claim(conn, actor, now=utcnow(), settings=queue.settings)
        if job is None:
            time.sleep(0.001)
            continue
        tally["claimed"] += 1
        try:
            with queue.tx() as conn:
                if job.type == "email.send":
                    reports.release(conn, actor, job.id, now=utcnow(), attempt=job.attempts)
                else:
                    reports.complete(conn, actor, job.id, now=utcnow(), attempt=job.attempts)
        except Conflict:  # cancelled by the operation while this worker held it
            tally["refused"] += 1


def until_applied(queue: Queue, selection: Selection) -> bulk_runs.Applied:
    """Preview, then confirm the count (again with the new one if the set changed)."""
    with queue.app.app_context():
        count = bulk_runs.preview(queue.admin, selection).count
        for _ in range(50):
            try:
                return bulk_runs.apply(
                    queue.admin,
                    selection,
                    reason="race",
                    expect_count=count,
                    origin=Origin(queue.admin.name),
                )
            except bulk.StaleCount as exc:
                count = exc.count
    raise AssertionError("the set never held still long enough to confirm")


def test_bulk_actions_racing_with_claims_leave_every_job_consistent(
    queue: Queue, backend: str
) -> None:
    emails = [queue.enqueue(now=utcnow()).id for _ in range(CHURNING)]
    reports = [queue.enqueue(now=utcnow(), type="report.build").id for _ in range(FINISHING)]
    third = make_user(queue.app, "svc-third-worker", "worker").actor()
    stop = threading.Event()
    tallies = [Counter[str]() for _ in range(3)]  # one per thread: += is not atomic
    threads = [
        threading.Thread(target=work, args=(queue, actor, stop, tally), daemon=True)
        for actor, tally in zip((queue.worker, queue.other_worker, third), tallies, strict=True)
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.05)  # let the workers get going
        cancel = until_applied(queue, Selection(Verb.CANCEL, JobFilters(type="email.send")))
        retry = until_applied(queue, Selection(Verb.RETRY, JobFilters()))
        time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(DEADLINE)
    assert not any(thread.is_alive() for thread in threads)
    tally = sum(tallies, Counter[str]())

    by_operation: Counter[tuple[int, str]] = Counter()
    claims = 0
    for job_id in emails + reports:
        job, events = queue.job(job_id), queue.events(job_id)  # nothing lost
        assert events[0].kind == "enqueued" and events[-1].to_status == job.status
        for before, after in itertools.pairwise(events):
            assert after.from_status == before.to_status, (job_id, before, after)
        attempts = [e.attempt for e in events if e.kind == "claimed"]
        assert attempts == list(range(1, job.attempts + 1)), job_id  # no claim twice
        claims += len(attempts)
        for event in events:
            for applied, kind in ((cancel, "cancelled"), (retry, "retried")):
                if event.note and event.note.startswith(f"bulk operation {applied.operation}:"):
                    assert event.kind == kind and job.type == "email.send", (job_id, event)
                    by_operation[(applied.operation, job_id)] += 1
    assert claims == tally["claimed"]
    assert max(by_operation.values()) == 1  # one event per job and operation
    # The emails were pending or running all along: the cancel took every one, from whichever.
    assert cancel.affected == CHURNING
    assert sum(1 for op, _ in by_operation if op == cancel.operation) == cancel.affected
    assert sum(1 for op, _ in by_operation if op == retry.operation) == retry.affected
    assert retry.affected == cancel.affected  # exactly the jobs the cancel took
    print(f"\n{backend}: cancel {cancel}, retry {retry}, workers {dict(tally)}")


@pytest.mark.parametrize("backend", [pytest.param("postgresql", marks=pytest.mark.pg)])
def test_a_job_locked_through_every_skipped_pass_is_waited_for(queue: Queue, backend: str) -> None:
    """PostgreSQL: a job another transaction holds for longer than the skipped passes last is
    still cancelled, once that transaction ends (only PostgreSQL skips locked rows: SQLite has
    no concurrent writer to wait for)."""
    jobs = [queue.enqueue(now=utcnow()).id for _ in range(3)]
    locked = threading.Event()

    def hold_the_last_job() -> None:
        """Lock the job until the operation, its skipped passes done, waits for the lock."""
        with db.engine(queue.app).connect() as conn, conn.begin():
            conn.execute(
                select(jobs_table.c.id).where(jobs_table.c.id == jobs[-1]).with_for_update()
            )
            locked.set()
            deadline = time.monotonic() + DEADLINE
            while time.monotonic() < deadline:
                # The activity view is read once per transaction unless its snapshot is cleared.
                conn.execute(text("SELECT pg_stat_clear_snapshot()"))
                if conn.execute(LOCK_WAITERS).scalar():
                    return
                time.sleep(0.01)

    holder = threading.Thread(target=hold_the_last_job)
    holder.start()
    assert locked.wait(DEADLINE)
    began = time.monotonic()
    applied = until_applied(queue, Selection(Verb.CANCEL, JobFilters()))
    waited = time.monotonic() - began
    holder.join(DEADLINE)
    assert applied.affected == len(jobs)
    assert [queue.job(job_id).status for job_id in jobs] == ["cancelled"] * len(jobs)
    assert waited >= bulk_runs.BUSY_PASSES * bulk_runs.BUSY_PAUSE_SECONDS
