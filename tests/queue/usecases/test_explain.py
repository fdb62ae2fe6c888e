"""The explainer, one test per reason code, on both engines; the clock is the ``now`` argument."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Connection

from app.audit.actions import Origin
from app.infra import db
from app.queue.rules.settings import QueueSettings
from app.queue.sql import explain as explain_sql
from app.queue.sql import jobs as jobs_sql
from app.queue.usecases import claiming, explain, job_actions, job_types, reports, type_polls
from app.queue.usecases.explain import Explanation
from app.queue.usecases.job_types import TypeChange
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import NotFound
from app.queue.vocabulary.jobs import Job
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_job, make_user

T0 = datetime(2030, 1, 1, 12, tzinfo=UTC)
IDLE = timedelta(minutes=5)
EVERY_CLAIM = type_polls.PollNotes(timedelta(0))  # notes each claim's poll, as the API's first


@dataclass
class Bench:
    app: Flask
    producer: Actor
    worker: Actor
    admin: Actor

    @property
    def settings(self) -> QueueSettings:
        return QueueSettings.from_config(self.app.config)

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        with db.transaction(self.app) as conn:
            yield conn

    def enqueue(self, now: datetime = T0, **fields: Any) -> Job:
        with self.tx() as conn:
            return make_job(conn, self.producer, self.settings, now=now, **fields)

    def claim(self, now: datetime = T0, **kw: Any) -> Job:
        kw.setdefault("polls", EVERY_CLAIM)
        with self.tx() as conn:
            found = claiming.claim_many(
                conn, self.worker, now=now, settings=self.settings, max_jobs=1, **kw
            ).jobs
        assert found
        return found[0]

    def claim_nothing(self, now: datetime, **kw: Any) -> list[Job]:
        """A worker's claim that finds no job it may take."""
        kw.setdefault("polls", EVERY_CLAIM)
        with self.tx() as conn:
            return claiming.claim_many(
                conn, self.worker, now=now, settings=self.settings, max_jobs=10, **kw
            ).jobs

    def explain(self, job: Job, now: datetime, actor: Actor | None = None) -> Explanation:
        with db.read(self.app) as conn:
            return explain.explain(
                conn,
                actor or self.producer,
                job.id,
                now=now,
                idle_after=IDLE,
                settings=self.settings,
            )

    def codes(self, job: Job, now: datetime) -> dict[str, dict[str, Any]]:
        found = self.explain(job, now)
        assert found.job.id == job.id
        for reason in found.reasons:  # every reason is a sentence for people
            assert reason.detail.endswith(".") and len(reason.detail) > 30, reason
        return {reason.code: reason.figures for reason in found.reasons}

    def limit(self, job_type: str, now: datetime = T0, **change: Any) -> None:
        """An admin's override of the type's flow limits."""
        request = TypeChange.parse(change, self.settings)
        with self.tx() as conn:
            job_types.change(
                conn,
                self.admin,
                self.settings,
                job_type,
                request,
                now=now,
                origin=Origin(self.admin.name),
            )


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"JOB_TYPE_SETTINGS": {"webhook.deliver": {"paused": True}}}


@pytest.fixture
def bench(app: Flask) -> Bench:
    return Bench(
        app,
        producer=make_user(app, "ex-producer", "producer").actor(),
        worker=make_user(app, "ex-worker", "worker").actor(),
        admin=make_user(app, "ex-admin", "admin").actor(),
    )


def test_scheduled(bench: Bench) -> None:
    job = bench.enqueue(run_at="2030-01-01T13:00:00Z")
    codes = bench.codes(job, T0)
    assert list(codes) == ["scheduled"]
    assert codes["scheduled"] == {"run_at": "2030-01-01T13:00:00.000000Z", "seconds": 3600.0}
    assert "in 1 h 00 min" in bench.explain(job, T0).reasons[0].detail


def test_backing_off(bench: Bench) -> None:
    job = bench.enqueue(max_retries=3)
    bench.claim()
    with bench.tx() as conn:
        reports.fail(
            conn, bench.worker, job.id, now=T0, settings=bench.settings, error="x", retry_in=90
        )
    codes = bench.codes(job, T0 + timedelta(seconds=30))
    assert list(codes) == ["backing_off"]
    assert codes["backing_off"]["seconds"] == 60.0
    assert (codes["backing_off"]["retry_count"], codes["backing_off"]["max_retries"]) == (1, 3)


def test_behind_in_queue(bench: Bench) -> None:
    first = bench.enqueue(now=T0 - timedelta(minutes=3))
    bench.enqueue(now=T0 - timedelta(minutes=2))
    urgent = bench.enqueue(now=T0, priority="medium")  # newer, but a higher priority
    bench.enqueue(now=T0 - timedelta(minutes=2), run_at="2030-01-01T12:30:00Z")  # not due
    last = bench.enqueue(now=T0 - timedelta(minutes=1))
    assert bench.codes(last, T0)["behind_in_queue"] == {"ahead": 3, "capped": False}
    assert bench.codes(urgent, T0)["behind_in_queue"] == {"ahead": 0, "capped": False}
    assert bench.codes(first, T0)["behind_in_queue"] == {"ahead": 1, "capped": False}
    assert "3 due jobs go first" in bench.explain(last, T0).reasons[0].detail
    # the count stops at its cap (10,000 in production) with a LIMIT
    with db.read(bench.app) as conn:
        assert explain_sql.jobs_ahead(conn, last, T0, cap=2) == 2
        assert explain_sql.jobs_ahead(conn, last, T0, cap=1) == 1


def test_no_worker_polling(bench: Bench) -> None:
    waiting = bench.enqueue(now=T0)
    assert "no_worker_polling" in bench.codes(waiting, T0)
    other = bench.enqueue(now=T0, **{"type": "report.build"})
    bench.claim(T0 + timedelta(seconds=1), types=("email.send",))  # takes the email.send job...
    # ...so the report.build job still has nobody asking for its type
    assert "no_worker_polling" in bench.codes(other, T0 + timedelta(seconds=2))
    later = bench.enqueue(now=T0 + timedelta(seconds=2))
    assert "no_worker_polling" not in bench.codes(later, T0 + timedelta(minutes=4))
    figures = bench.codes(later, T0 + timedelta(minutes=6))["no_worker_polling"]
    assert figures == {"window_seconds": 300.0, "type": "email.send"}
    bench.claim(T0 + timedelta(minutes=6))  # a claim of any type asks for every type
    assert "no_worker_polling" not in bench.codes(other, T0 + timedelta(minutes=6))


def test_a_worker_whose_claims_find_nothing_is_polling(bench: Bench) -> None:
    """A worker long-polling a type held back by its max_running gets nothing, again and
    again: it is still there, and the job's page must not say that nobody polls."""
    bench.limit("report.build", max_running=1)
    bench.enqueue(type="report.build")
    waiting = bench.enqueue(type="report.build")
    bench.claim(T0, types=("report.build",), lease_seconds=3600)  # and runs for long
    later = T0 + timedelta(minutes=10)
    assert "no_worker_polling" in bench.codes(waiting, later)  # nobody asked since
    assert bench.claim_nothing(later, types=("report.build",)) == []
    codes = bench.codes(waiting, later + timedelta(seconds=5))
    assert "type_at_max_running" in codes and "no_worker_polling" not in codes


def test_polls_are_written_at_most_once_an_interval_per_process(bench: Bench) -> None:
    """The claim path is hot: a process writes a type's poll once per interval, whatever the
    number of empty claims; another process (its own memory) writes its own."""
    notes, elsewhere = (type_polls.PollNotes(timedelta(seconds=30)) for _ in range(2))
    second = timedelta(seconds=1)
    seen = []
    for memory, at in [(notes, 0), (notes, 29), (elsewhere, 29), (notes, 30)]:
        found = bench.claim_nothing(T0 + at * second, types=("report.build",), polls=memory)
        assert found == []
        with db.read(bench.app) as conn:
            seen.append(type_polls.last_poll(conn, "report.build"))
    assert seen == [T0, T0, T0 + 29 * second, T0 + 30 * second]
    with db.read(bench.app) as conn:
        assert type_polls.last_poll(conn, "email.send") is None  # nobody asked for it


def test_type_paused(bench: Bench) -> None:
    job = bench.enqueue(run_at="2030-01-01T12:10:00Z")
    bench.limit("email.send", paused=True)
    later = T0 + timedelta(minutes=20)
    codes = bench.codes(job, later)
    assert codes["type_paused"] == {
        "type": "email.send", "source": "override", "changed_by": "ex-admin",
        "changed_at": "2030-01-01T12:00:00.000000Z",
    }  # fmt: skip
    assert "no_worker_polling" not in codes  # no worker may claim it anyway
    detail = bench.explain(job, later).reasons[0].detail
    assert "paused by an admin" in detail and "ex-admin at 2030-01-01 12:00:00 UTC" in detail
    scheduled = bench.codes(job, T0)  # not due yet, and paused too: both are said
    assert list(scheduled) == ["scheduled", "type_paused"]
    configured = bench.enqueue(type="webhook.deliver")  # paused by JOB_TYPE_SETTINGS
    assert bench.codes(configured, T0)["type_paused"]["source"] == "configuration"
    bench.limit("email.send", paused=False)
    assert "type_paused" not in bench.codes(job, later)


def test_type_at_max_running(bench: Bench) -> None:
    bench.limit("report.build", max_running=1)
    bench.enqueue(type="report.build")
    waiting = bench.enqueue(type="report.build")
    assert "type_at_max_running" not in bench.codes(waiting, T0)  # one slot is free
    bench.claim()
    codes = bench.codes(waiting, T0)
    assert codes["type_at_max_running"] == {
        "type": "report.build", "max_running": 1, "running": 1,
    }  # fmt: skip
    found = bench.explain(waiting, T0)
    assert "1 job(s) of its type report.build are running" in found.reasons[0].detail
    behind = next(r for r in found.reasons if r.code == "behind_in_queue")
    assert behind.detail == "It is due and next in line once its type may run again."


def test_type_rate_limited(bench: Bench) -> None:
    bench.limit("report.build", rate_limit="1/hour")
    bench.enqueue(type="report.build")
    waiting = bench.enqueue(type="report.build")
    bench.claim(T0 + timedelta(minutes=10))
    now = T0 + timedelta(minutes=30)
    assert bench.codes(waiting, now)["type_rate_limited"] == {
        "type": "report.build",
        "rate_limit": "1/hour",
        "claims_in_window": 1,
        "window_started_at": "2030-01-01T12:00:00.000000Z",
        "window_ends_at": "2030-01-01T13:00:00.000000Z",
    }
    detail = bench.explain(waiting, now).reasons[0].detail
    assert "the next window opens at 2030-01-01 13:00:00 UTC (in 30 min 00 s)" in detail
    assert "type_rate_limited" not in bench.codes(waiting, T0 + timedelta(hours=1))


def test_running(bench: Bench) -> None:
    job = bench.enqueue()
    held = bench.claim(T0)
    running = bench.codes(job, T0 + timedelta(seconds=10))["running"]
    assert running["worker_id"] == "ex-worker" and running["last_heartbeat_at"] is None
    assert running["lease_expires_at"] == "2030-01-01T12:05:00.000000Z"
    with bench.tx() as conn:
        reports.heartbeat(
            conn,
            bench.worker,
            job.id,
            now=T0 + timedelta(seconds=20),
            settings=bench.settings,
            progress=50,
            attempt=held.attempts,
        )
    running = bench.codes(job, T0 + timedelta(seconds=30))["running"]
    assert running["last_heartbeat_at"] == "2030-01-01T12:00:20.000000Z"
    assert not running["lease_expired"]
    late = bench.explain(job, T0 + timedelta(minutes=10))
    assert late.reasons[0].figures["lease_expired"] and "expired" in late.reasons[0].detail


@pytest.mark.parametrize("retryable", [True, False])
def test_retries_exhausted(bench: Bench, retryable: bool) -> None:
    job = bench.enqueue(max_retries=0 if retryable else 2)
    bench.claim()
    with bench.tx() as conn:
        reports.fail(
            conn,
            bench.worker,
            job.id,
            now=T0,
            settings=bench.settings,
            error="boom",
            retryable=retryable,
        )
    found = bench.explain(job, T0 + timedelta(hours=1))
    assert [r.code for r in found.reasons] == ["retries_exhausted"]
    assert ("not retryable" in found.reasons[0].detail) is not retryable
    assert "1 h 00 min ago" in found.reasons[0].detail


def test_cancelled(bench: Bench) -> None:
    job = bench.enqueue()
    with bench.tx() as conn:
        job_actions.cancel(conn, bench.admin, job.id, now=T0, origin=Origin(bench.admin.name))
    codes = bench.codes(job, T0)
    assert codes == {
        "cancelled": {"cancelled_at": "2030-01-01T12:00:00.000000Z", "cancelled_by": "ex-admin"}
    }


def test_completed(bench: Bench) -> None:
    job = bench.enqueue()
    bench.claim()
    with bench.tx() as conn:
        reports.complete(conn, bench.worker, job.id, now=T0 + timedelta(seconds=5))
    assert bench.codes(job, T0 + timedelta(seconds=5)) == {
        "completed": {"attempts": 1, "finished_at": "2030-01-01T12:00:05.000000Z"}
    }


def test_explaining_needs_the_same_visibility_as_the_job(bench: Bench) -> None:
    job = bench.enqueue()
    stranger = make_user(bench.app, "ex-other", "producer").actor()
    for actor in (stranger, bench.worker):  # the worker never held it
        with pytest.raises(NotFound), db.read(bench.app) as conn:
            explain.explain(conn, actor, job.id, now=T0, idle_after=IDLE, settings=bench.settings)
    assert bench.explain(job, T0, bench.admin).job.id == job.id
    with db.read(bench.app) as conn:
        assert jobs_sql.get_job(conn, job.id) is not None
