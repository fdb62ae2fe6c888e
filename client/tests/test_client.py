"""Client against a real gunicorn server: every method that exists today, typed errors."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from conftest import Server
from queuelog_client import (
    Client,
    Conflict,
    Forbidden,
    NotFound,
    QueuelogError,
    Unauthorized,
    Unprocessable,
)

pytestmark = pytest.mark.slow


def test_enqueue_returns_a_typed_job_and_get_reads_it_back(producer: Client) -> None:
    job = producer.enqueue("email.send", {"to": "ada@example.com"}, priority="high")
    assert job.id > 0 and job.type == "email.send" and job.status == "pending"
    assert job.payload == {"to": "ada@example.com"} and job.priority == "high"
    assert job.created_at is not None and job.created_at.tzinfo is not None
    assert job.idempotency_key and job.idempotency_key.startswith("auto-")
    again = producer.get(job.id)
    assert again.id == job.id and again.created_at == job.created_at and again.extra == {}


def test_enqueue_options_reach_the_server(producer: Client) -> None:
    at = datetime.now(UTC) + timedelta(hours=1)
    job = producer.enqueue("report.build", run_at=at, max_retries=7, priority="critical")
    assert job.max_retries == 7 and job.priority == "critical"
    assert job.run_at is not None and abs((job.run_at - at).total_seconds()) < 0.01
    delayed = producer.enqueue("report.build", delay_seconds=600)
    assert delayed.run_at is not None and delayed.created_at is not None
    assert delayed.run_at - delayed.created_at >= timedelta(seconds=599)


def test_same_idempotency_key_gives_the_same_job(producer: Client) -> None:
    key = f"order-{uuid.uuid4().hex}"
    first = producer.enqueue("email.send", {"n": 1}, idempotency_key=key)
    second = producer.enqueue("email.send", {"n": 1}, idempotency_key=key)
    assert first.id == second.id and first.idempotency_key == key
    with pytest.raises(Unprocessable):
        producer.enqueue("email.send", {"n": 2}, idempotency_key=key)


def test_bad_options_are_refused_before_sending(producer: Client) -> None:
    with pytest.raises(TypeError, match="colour"):
        producer.enqueue("email.send", colour="red")
    with pytest.raises(ValueError, match="aware"):
        producer.enqueue("email.send", run_at=datetime(2030, 1, 1))


def test_jobs_follows_cursors_across_pages(producer: Client) -> None:
    marker = uuid.uuid4().hex
    made = [producer.enqueue("webhook.deliver", {"marker": marker, "n": n}).id for n in range(23)]
    seen = [job.id for job in producer.jobs(type="webhook.deliver", limit=5)]
    assert [i for i in seen if i in set(made)] == sorted(made, reverse=True)  # newest first
    assert len(seen) == len(set(seen))  # no job on two pages
    pending = list(producer.jobs(status="pending", type="webhook.deliver", limit=1000))
    assert set(made) <= {job.id for job in pending}


def test_cancel_then_conflict(producer: Client) -> None:
    job = producer.enqueue("email.send")
    cancelled = producer.cancel(job.id)
    assert cancelled.status == "cancelled" and cancelled.finished_at is not None
    with pytest.raises(Conflict) as caught:
        producer.cancel(job.id)
    assert caught.value.status == 409 and "cancelled" in (caught.value.detail or "")
    assert isinstance(caught.value, QueuelogError) and caught.value.title


def test_admin_retries_a_cancelled_job_and_events_tell_the_story(
    producer: Client, admin: Client
) -> None:
    job = producer.enqueue("email.send")
    producer.cancel(job.id)
    with pytest.raises(Forbidden) as caught:
        producer.retry(job.id)
    assert caught.value.status == 403
    again = admin.retry(job.id)
    assert again.status == "pending" and again.retry_count == 0
    events = producer.events(job.id)
    assert [e.to_status for e in events] == ["pending", "cancelled", "pending"]
    assert events[0].at is not None and events[0].at.tzinfo is not None
    assert events[1].actor == "producer" and events[2].actor == "admin"


def test_typed_errors_carry_the_problem_fields(server: Server, producer: Client) -> None:
    with Client(server.url, "not-a-token") as stranger, pytest.raises(Unauthorized) as e401:
        stranger.get(1)
    assert e401.value.status == 401
    with server.client("worker") as worker, pytest.raises(Forbidden) as e403:
        worker.enqueue("email.send")
    assert e403.value.status == 403
    with pytest.raises(NotFound) as e404:
        producer.get(10**12)
    assert e404.value.status == 404 and e404.value.detail
    with pytest.raises(Unprocessable) as e422:
        producer.enqueue("no.such.type", {"x": 1})
    assert e422.value.status == 422 and "type" in e422.value.errors
    with pytest.raises(Unprocessable) as bad_filter:
        list(producer.jobs(status="sleeping"))
    assert "status" in bad_filter.value.errors


def test_workers_see_only_what_they_hold(producer: Client, worker: Client) -> None:
    job = producer.enqueue("email.send")
    with pytest.raises(NotFound):
        worker.get(job.id)
