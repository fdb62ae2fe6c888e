"""Per-type flow control in the claim, on both engines: paused types wait, max_running and
rate_limit hold within one claim of many jobs, overrides replace the configuration. The clock
is the ``now`` argument."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask

from app.audit.actions import Origin
from app.queue.rules import type_limits
from app.queue.rules.type_limits import RateLimit
from app.queue.usecases import claiming, job_types, reports
from app.queue.usecases.job_types import TypeChange
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.limits import Window
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue, make_queue

LIMITS = {
    "report.build": {"max_running": 2},
    "webhook.deliver": {"rate_limit": "3/minute"},
}


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"JOB_TYPE_SETTINGS": LIMITS}


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def claim_many(queue: Queue, max_jobs: int, now: Any = T0, **options: Any) -> list[Job]:
    with queue.tx() as conn:
        return claiming.claim_many(
            conn, queue.worker, now=now, settings=queue.settings, max_jobs=max_jobs, **options
        ).jobs


def change(queue: Queue, job_type: str, **fields: Any) -> job_types.TypeView:
    request = TypeChange.parse(fields, queue.settings)
    with queue.tx() as conn:
        return job_types.change(
            conn,
            queue.admin,
            queue.settings,
            job_type,
            request,
            now=T0,
            origin=Origin(queue.admin.name),
        ).value


def complete(queue: Queue, job: Job) -> None:
    with queue.tx() as conn:
        reports.complete(conn, queue.worker, job.id, now=T0, attempt=job.attempts)


def enqueue_each(queue: Queue, count: int, job_type: str, **fields: Any) -> list[Job]:
    return [queue.enqueue(type=job_type, **fields) for _ in range(count)]


def test_max_running_holds_within_one_claim_and_frees_a_slot_per_finished_job(
    queue: Queue, backend: str
) -> None:
    reports = enqueue_each(queue, 4, "report.build", priority="medium")  # ahead of the emails
    emails = enqueue_each(queue, 3, "email.send")
    first = claim_many(queue, 10)
    # two reports (the limit), then the emails behind them, in claim order
    assert [job.id for job in first] == [reports[0].id, reports[1].id, *(e.id for e in emails)]
    assert claim_many(queue, 10) == []  # the other reports wait as pending
    assert queue.job(reports[2].id).status == "pending"
    complete(queue, first[0])
    assert [job.id for job in claim_many(queue, 10)] == [reports[2].id]


def test_a_typed_claim_of_many_gets_only_the_allowance(queue: Queue, backend: str) -> None:
    enqueue_each(queue, 5, "report.build")
    enqueue_each(queue, 5, "webhook.deliver")
    claimed = claim_many(queue, 100, types=("report.build", "webhook.deliver"))
    assert Counter(job.type for job in claimed) == {"report.build": 2, "webhook.deliver": 3}
    assert claim_many(queue, 100, types=("webhook.deliver",)) == []


def test_rate_limit_counts_claims_per_fixed_window(queue: Queue, backend: str) -> None:
    jobs = enqueue_each(queue, 8, "webhook.deliver")
    minute = T0.replace(second=0)
    assert len(claim_many(queue, 2, now=minute + timedelta(seconds=10))) == 2
    assert len(claim_many(queue, 5, now=minute + timedelta(seconds=50))) == 1
    assert claim_many(queue, 5, now=minute + timedelta(seconds=59.9)) == []
    # completing does not give a claim back: the window counts claims, not running jobs
    complete(queue, queue.job(jobs[0].id))
    assert claim_many(queue, 5, now=minute + timedelta(seconds=59.9)) == []
    assert len(claim_many(queue, 5, now=minute + timedelta(seconds=60))) == 3
    # a clock behind the window already counted gets nothing rather than a second window
    assert claim_many(queue, 5, now=minute + timedelta(seconds=30)) == []
    assert len(claim_many(queue, 5, now=minute + timedelta(seconds=125))) == 2  # the last two


def test_a_paused_type_is_never_handed_out_until_resumed(queue: Queue, backend: str) -> None:
    paused = enqueue_each(queue, 2, "email.send", priority="medium")
    other = queue.enqueue(type="report.build")
    view = change(queue, "email.send", paused=True)
    assert view.limits.paused and view.counts["pending"] == 2
    assert [job.id for job in claim_many(queue, 10)] == [other.id]
    assert claim_many(queue, 10, types=("email.send",)) == []
    assert queue.job(paused[0].id).status == "pending"
    change(queue, "email.send", paused=False)
    assert [job.id for job in claim_many(queue, 10)] == [job.id for job in paused]


def test_overrides_replace_the_configuration_and_null_restores_it(
    queue: Queue, backend: str
) -> None:
    assert change(queue, "report.build", max_running=5).limits.max_running == 5
    enqueue_each(queue, 6, "report.build")
    assert len(claim_many(queue, 10)) == 5
    view = change(queue, "report.build", max_running=None, rate_limit="1/hour")
    assert (view.limits.max_running, str(view.limits.rate_limit)) == (2, "1/hour")
    assert view.override is not None and view.override.max_running is None
    assert claim_many(queue, 10) == []  # five running already: above the configured two
    cleared = change(queue, "report.build", rate_limit=None)
    assert cleared.limits == cleared.configured


def test_an_unlimited_type_is_claimed_without_counting(queue: Queue, backend: str) -> None:
    """A claim that cannot hand out a limited type takes no turn (it stays the plain claim)."""
    enqueue_each(queue, 3, "report.build")
    enqueue_each(queue, 3, "email.send")
    change(queue, "report.build", max_running=1)
    assert len(claim_many(queue, 10, types=("email.send",))) == 3
    assert len(claim_many(queue, 10)) == 1


def test_rate_limits_and_their_fixed_windows() -> None:
    """Pure rules: windows start at whole multiples of their length, a unit change keeps the
    claims already counted, a stored window ahead of the clock counts as full."""
    rate = RateLimit.parse("10/minute")
    assert (rate.count, rate.seconds, str(rate)) == (10, 60, "10/minute")
    at = T0 + timedelta(minutes=3, seconds=42.5)
    assert rate.window_start(at) == T0 + timedelta(minutes=3)
    for text in ("10/min", "0/second", "1/day", " 5/hour", "5/hour ", "1e3/second", 10):
        with pytest.raises(ValueError, match="N/second"):
            RateLimit.parse(text)
    hourly = RateLimit.parse("30/hour")
    assert type_limits.window_claims(hourly, None, at) == 0
    assert type_limits.window_claims(hourly, Window(T0 - timedelta(hours=1), 30), at) == 0  # over
    assert (
        type_limits.window_claims(hourly, Window(T0 + timedelta(minutes=3), 7), at) == 7
    )  # inside
    assert type_limits.window_claims(hourly, Window(T0 + timedelta(hours=1), 1), at) == 30  # ahead
