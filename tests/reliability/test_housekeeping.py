"""`flask jobs prune --older-than`: finished jobs older than the age go, with their events."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskCliRunner
from sqlalchemy import select

from app.audit.actions import Origin
from app.infra import db
from app.queue.usecases import job_actions, reports
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import jobs
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import Queue

BATCH = 2


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"PRUNE_BATCH_SIZE": BATCH, "BACKOFF_BASE_SECONDS": 0}


def _finish(queue: Queue, how: str, at: datetime) -> int:
    """A job that ended ``how`` at ``at`` (driven through the service's clock)."""
    job = queue.enqueue(now=at, max_retries=0)
    if how == "pending":
        return job.id
    if how == "cancelled":
        with queue.tx() as conn:
            job_actions.cancel(conn, queue.admin, job.id, now=at, origin=Origin(queue.admin.name))
        return job.id
    claimed = queue.claim(now=at)
    assert claimed is not None and claimed.id == job.id
    with queue.tx() as conn:
        if how == "completed":
            reports.complete(conn, queue.worker, job.id, now=at)
        elif how == "failed":
            reports.fail(conn, queue.worker, job.id, now=at, settings=queue.settings, error="x")
    return job.id


def _ids(queue: Queue) -> set[int]:
    with db.read(queue.app) as conn:
        return set(conn.execute(select(jobs.c.id)).scalars())


def test_prune_deletes_only_old_finished_jobs_with_their_events(
    queue: Queue, runner: FlaskCliRunner
) -> None:
    now = utcnow()
    old, recent = now - timedelta(days=8), now - timedelta(days=6)
    doomed = [_finish(queue, how, old) for how in ("completed", "failed", "cancelled") * 2]
    doomed.append(_finish(queue, "completed", old))
    kept = [_finish(queue, how, recent) for how in ("completed", "failed", "cancelled")]
    # Unfinished jobs stay however old they are (made in an order where no claim takes another):
    kept.append(_finish(queue, "running", old))  # its lease is long gone, but it is not finished
    revived = _finish(queue, "failed", old)
    with queue.tx() as conn:  # an old finished job retried by an admin is alive again
        kept.append(
            job_actions.retry(
                conn, queue.admin, revived, now=old, origin=Origin(queue.admin.name)
            ).value.id
        )
    kept.append(_finish(queue, "pending", old))

    result = runner.invoke(args=["jobs", "prune", "--older-than", "7d"])

    assert result.exit_code == 0, result.output
    assert f"pruned {len(doomed)} finished job(s) older than 7d" in result.output
    assert _ids(queue) == set(kept)
    for job_id in doomed:
        assert queue.events(job_id) == []
    for job_id in kept:
        assert queue.events(job_id), job_id
    again = runner.invoke(args=["jobs", "prune", "--older-than", "7d"])
    assert "pruned 0 finished job(s)" in again.output


def test_prune_works_in_batches(queue: Queue) -> None:
    old = utcnow() - timedelta(days=30)
    for _ in range(5):
        _finish(queue, "completed", old)
    cutoff = utcnow() - timedelta(days=7)
    sizes = []
    while True:
        with queue.tx() as conn:  # one short write transaction per batch
            sizes.append(job_actions.prune(conn, finished_before=cutoff, batch=BATCH))
        if sizes[-1] < BATCH:
            break
    assert sizes == [2, 2, 1]


@pytest.mark.parametrize(
    "age", ["7", "7x", "-7d", "d", "7 days", "", "99999999999d", "999999999w", "999999d"]
)
def test_prune_bad_duration_is_a_clean_cli_error(
    queue: Queue, runner: FlaskCliRunner, age: str
) -> None:
    _finish(queue, "completed", utcnow() - timedelta(days=30))
    result = runner.invoke(args=["jobs", "prune", "--older-than", age])
    assert result.exit_code == 2, (age, result.output, result.exception)
    assert "Traceback" not in result.output
    assert "--older-than" in result.output or "Invalid value" in result.output, result.output
    assert len(_ids(queue)) == 1


def test_prune_spares_a_job_an_admin_retried(queue: Queue) -> None:
    old = utcnow() - timedelta(days=30)
    retried = _finish(queue, "failed", old)
    gone = _finish(queue, "failed", old)
    with queue.tx() as conn:
        job_actions.retry(conn, queue.admin, retried, now=utcnow(), origin=Origin(queue.admin.name))
        pruned = job_actions.prune(conn, finished_before=utcnow() - timedelta(days=7), batch=10)
    assert pruned == 1
    assert _ids(queue) == {retried}
    assert gone not in _ids(queue)
