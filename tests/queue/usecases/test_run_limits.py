"""Run-time limits (max_run_seconds): the claim stamps each attempt's deadline; past it the
server fails the attempt even while it heartbeats (event ``timed_out``, then the retry policy),
refusing the late heartbeat or finish with the stale-attempt 409 in a transaction that still
commits; housekeeping times out the rest with one statement per edge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskCliRunner
from sqlalchemy import select

from app.infra import db, housekeeper
from app.queue.contract.response_builders import job_out
from app.queue.rules.settings import QueueSettings
from app.queue.sql import jobs as jobs_sql
from app.queue.usecases import claiming, finishing, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import AttemptTimedOut, Conflict
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import job_events
from tests.backends import every_backend  # noqa: F401
from tests.builders import make_job, make_user
from tests.queue.sql.test_statement_counts import counted

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LIMIT = 60


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"JOB_TYPE_SETTINGS": {"report.build": {"max_run_seconds": LIMIT}}}


def _setup(app: Flask) -> tuple[QueueSettings, Actor, Actor]:
    settings = QueueSettings.from_config(app.config)
    producer = make_user(app, "p", "producer").actor()
    worker = make_user(app, "w", "worker").actor()
    return settings, producer, worker


def _claimed(app: Flask, settings: QueueSettings, producer: Actor, worker: Actor, **kw: Any) -> Job:
    with db.transaction(app) as conn:
        make_job(conn, producer, settings, now=T0, type="report.build", **kw)
        job = claiming.claim(conn, worker, now=T0, settings=settings)
    assert job is not None
    return job


def _kinds(app: Flask, job_id: int) -> list[tuple[str, str | None, str | None]]:
    with db.read(app) as conn:
        query = select(job_events.c.kind, job_events.c.actor, job_events.c.error).where(
            job_events.c.job_id == job_id
        )
        return [tuple(row) for row in conn.execute(query.order_by(job_events.c.id))]


def _job(app: Flask, job_id: int) -> Job:
    with db.read(app) as conn:
        found = jobs_sql.get_job(conn, job_id)
    assert found is not None
    return found


def test_the_claim_stamps_the_deadline_of_limited_types_only(app: Flask, backend: str) -> None:
    settings, producer, worker = _setup(app)
    job = _claimed(app, settings, producer, worker)
    assert job.deadline_at == T0 + timedelta(seconds=LIMIT)
    assert job_out(job).deadline_at == "2030-01-01T00:01:00.000000Z"
    with db.transaction(app) as conn:
        make_job(conn, producer, settings, now=T0, type="email.send")
        other = claiming.claim(conn, worker, now=T0, settings=settings)
    assert other is not None and other.deadline_at is None


def test_a_heartbeat_past_the_deadline_is_refused_and_the_attempt_retried(
    app: Flask, backend: str
) -> None:
    settings, producer, worker = _setup(app)
    job = _claimed(app, settings, producer, worker)
    with db.transaction(app) as conn:  # on time: the lease moves on
        beat = reports.heartbeat(
            conn, worker, job.id, now=T0 + timedelta(seconds=59), settings=settings
        ).value
    assert beat.status == "running"
    late = T0 + timedelta(seconds=LIMIT)
    with pytest.raises(AttemptTimedOut) as refused, db.transaction(app) as conn:
        reports.heartbeat(conn, worker, job.id, now=late, settings=settings, attempt=1)
    assert refused.value.status == 409 and "stale" in refused.value.detail
    after = _job(app, job.id)  # the refusal's transaction committed the time-out
    assert (after.status, after.retry_count, after.worker_id, after.deadline_at) == (
        "pending",
        1,
        None,
        None,
    )
    assert after.run_at > late and after.error == finishing.TIMED_OUT
    assert _kinds(app, job.id)[-1] == ("timed_out", None, finishing.TIMED_OUT)


def test_a_late_finish_gets_409_and_out_of_attempts_fails_for_good(
    app: Flask, backend: str
) -> None:
    settings, producer, worker = _setup(app)
    job = _claimed(app, settings, producer, worker, max_retries=0)
    late = T0 + timedelta(seconds=LIMIT + 5)
    with pytest.raises(AttemptTimedOut), db.transaction(app) as conn:
        reports.complete(conn, worker, job.id, now=late, result={"ok": 1}, settings=settings)
    after = _job(app, job.id)
    assert (after.status, after.finished_at, after.result) == ("failed", late, None)
    assert _kinds(app, job.id)[-1][0] == "timed_out"
    with pytest.raises(Conflict) as again, db.transaction(app) as conn:  # a repeat: plain 409
        reports.complete(conn, worker, job.id, now=late, settings=settings)
    assert not isinstance(again.value, AttemptTimedOut) and "failed" in again.value.detail


def test_a_late_fail_is_refused_like_a_late_complete(app: Flask, backend: str) -> None:
    settings, producer, worker = _setup(app)
    job = _claimed(app, settings, producer, worker)
    late = T0 + timedelta(seconds=LIMIT)
    with pytest.raises(AttemptTimedOut), db.transaction(app) as conn:
        reports.fail(conn, worker, job.id, now=late, settings=settings, error="boom")
    after = _job(app, job.id)
    assert (after.status, after.retry_count, after.error) == ("pending", 1, finishing.TIMED_OUT)


def test_the_sweep_times_out_every_overdue_attempt_in_one_statement_per_edge(
    app: Flask, backend: str
) -> None:
    settings, producer, _ = _setup(app)
    workers = [make_user(app, f"w{i}", "worker").actor() for i in range(6)]
    claimed = [
        _claimed(app, settings, producer, w, max_retries=i % 2) for i, w in enumerate(workers)
    ]
    with db.transaction(app) as conn:  # one more, of a type without a limit: never timed out
        make_job(conn, producer, settings, now=T0, type="email.send")
        free = claiming.claim(conn, workers[0], now=T0, settings=settings)
    assert free is not None
    late = T0 + timedelta(seconds=LIMIT + 1)
    with db.transaction(app) as conn:
        assert (
            finishing.sweep_overdue(
                conn, now=T0 + timedelta(seconds=30), settings=settings, limit=100
            ).value
            == 0
        )
    with counted(app) as sent, db.transaction(app) as conn:
        moved = finishing.sweep_overdue(conn, now=late, settings=settings, limit=100).value
    assert moved == len(claimed)
    updates = [s for s in sent if s.lstrip().upper().startswith("UPDATE JOBS")]
    assert len(updates) == 2  # one per edge: retried and failed for good
    statuses = sorted(_job(app, job.id).status for job in claimed)
    assert statuses == ["failed"] * 3 + ["pending"] * 3
    assert _job(app, free.id).status == "running"


def test_the_tick_and_flask_jobs_tick_time_out_what_nobody_reports(
    app: Flask, backend: str, runner: FlaskCliRunner
) -> None:
    settings, producer, worker = _setup(app)
    started = utcnow() - timedelta(seconds=LIMIT + 30)
    jobs_ = []
    for _ in range(2):
        with db.transaction(app) as conn:
            make_job(conn, producer, settings, now=started, type="report.build")
            claimed = claiming.claim(conn, worker, now=started, settings=settings)
        assert claimed is not None
        jobs_.append(claimed)
    with app.app_context():
        assert housekeeper.housekeeping(app).time_out_overdue(utcnow(), batches=1) == 2
        assert housekeeper.housekeeping(app).time_out_overdue(utcnow()) == 0
    assert {_job(app, job.id).status for job in jobs_} == {"pending"}
    result = runner.invoke(args=["jobs", "tick"])
    assert result.exit_code == 0, result.output
    assert "timed out 0 attempt(s)" in result.output
