"""Secret payload fields in the service, on both engines: an expired lease keeps them for the
retry and erases them when no retry is left; the claim reads them for its own jobs only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select

from app.infra import db
from app.infra.secretbox import SecretBox
from app.queue.contract.job_requests import EnqueueBody
from app.queue.rules import secret_fields
from app.queue.usecases import claiming, enqueueing
from app.queue.vocabulary.jobs import Job
from app.storage.schema import jobs
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.conftest import TEST_SECRETS_KEY
from tests.harness import T0, Queue, make_queue

BOX = SecretBox.from_setting(TEST_SECRETS_KEY)
SECRETS = {"TOKEN": "lease-test-value"}


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def _enqueue(queue: Queue, **fields: Any) -> Job:
    body = {"type": "email.send", "secrets": SECRETS, **fields}
    request = EnqueueBody.parse(body, queue.settings, secrets_box=BOX).to_request(BOX)
    with queue.tx() as conn:
        job, _ = enqueueing.enqueue(conn, queue.producer, request, now=T0).value
    return job


def _sealed(queue: Queue, job_id: int) -> str | None:
    with db.read(queue.app) as conn:
        query = select(jobs.c.secrets_sealed).where(jobs.c.id == job_id)
        return conn.execute(query).scalar_one()  # type: ignore[no-any-return]


def _expire(queue: Queue, at: Any) -> None:
    with queue.tx() as conn:
        claiming.recover_expired(conn, now=at, settings=queue.settings, limit=10)


def test_an_expired_lease_keeps_them_for_the_retry_and_erases_them_at_the_end(
    queue: Queue, backend: str
) -> None:
    job = _enqueue(queue, max_retries=1)
    lease = timedelta(seconds=queue.settings.default.lease_seconds + 1)
    assert queue.claim() is not None
    _expire(queue, T0 + lease)
    assert queue.job(job.id).status == "pending" and _sealed(queue, job.id) is not None
    again = T0 + 2 * lease + timedelta(hours=1)  # past the backoff
    assert queue.claim(now=again) is not None
    _expire(queue, again + lease)
    assert queue.job(job.id).status == "failed" and _sealed(queue, job.id) is None


def test_the_claim_reads_only_what_the_worker_holds(queue: Queue, backend: str) -> None:
    job = _enqueue(queue)
    claimed = queue.claim()
    assert claimed is not None
    with queue.tx() as conn:
        assert secret_fields.for_holder(conn, [claimed], queue.worker.name, BOX) == {
            job.id: SECRETS
        }
        assert secret_fields.for_holder(conn, [claimed], queue.other_worker.name, BOX) == {
            job.id: {}
        }
