"""Uniqueness while active in the service, on both engines, with the clock as ``now``: which
jobs count as active duplicates and for how long (``unique_for``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask import Flask

from app.audit.actions import Origin
from app.queue.contract.job_requests import EnqueueBody
from app.queue.rules import uniqueness
from app.queue.usecases import enqueueing, job_actions, reports
from app.queue.vocabulary.jobs import Job
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue, make_queue


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def enqueue(queue: Queue, now: Any = T0, **fields: Any) -> tuple[Job, bool, bool]:
    """(job, created, duplicate) of one enqueue by the producer."""
    request = EnqueueBody.parse({"type": "email.send", **fields}, queue.settings).to_request()
    with queue.tx() as conn:
        job, created = enqueueing.enqueue(conn, queue.producer, request, now=now).value
    return job, created, uniqueness.is_duplicate(request, job, created)


def test_unique_for_counts_only_jobs_enqueued_that_recently(queue: Queue, backend: str) -> None:
    first, *_ = enqueue(queue, unique_key="k")
    later = T0 + timedelta(minutes=2)
    assert enqueue(queue, later, unique_key="k", unique_for=121)[1:] == (False, True)
    assert enqueue(queue, later, unique_key="k", unique_for=120)[1:] == (False, True)
    second, created, _ = enqueue(queue, later, unique_key="k", unique_for=119.5)
    assert created and second.id != first.id
    # two are active now: the newest answers, without unique_for any age counts
    assert enqueue(queue, T0 + timedelta(days=30), unique_key="k")[0].id == second.id


def test_a_scheduled_job_is_active_and_keeps_its_own_run_at(queue: Queue, backend: str) -> None:
    later, *_ = enqueue(queue, unique_key="k", run_at="2030-06-01T00:00:00Z")
    job, created, duplicate = enqueue(queue, unique_key="k", delay_seconds=5)
    assert (job.id, created, duplicate, job.run_at) == (later.id, False, True, later.run_at)


def test_failed_and_retried_jobs(queue: Queue, backend: str) -> None:
    first, *_ = enqueue(queue, unique_key="k", max_retries=0)
    claimed = queue.claim()
    assert claimed is not None
    with queue.tx() as conn:
        reports.fail(
            conn, queue.worker, first.id, now=T0, settings=queue.settings, error="x", attempt=1
        )
    fresh, created, _ = enqueue(queue, unique_key="k")
    assert created
    with queue.tx() as conn:  # an admin retry makes the old one active again, beside the new
        job_actions.retry(conn, queue.admin, first.id, now=T0, origin=Origin(queue.admin.name))
    assert enqueue(queue, unique_key="k")[0].id == fresh.id  # the newest active one
