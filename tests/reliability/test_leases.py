"""Leases, heartbeats, fencing and the recovery of expired leases (in claim and `jobs reap`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskCliRunner

from app.queue.usecases import claiming, reports
from app.queue.vocabulary.errors import Conflict
from app.queue.vocabulary.timeutil import utcnow
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import Api
from tests.harness import T0, Queue

LEASE = 20
MAX_LEASE = 100
REPORT_LEASE = 45


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {
        "LEASE_SECONDS": LEASE,
        "MAX_LEASE_SECONDS": MAX_LEASE,
        "BACKOFF_BASE_SECONDS": 0,
        "JOB_TYPE_SETTINGS": {"report.build": {"lease_seconds": REPORT_LEASE}},
    }


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _lease(job: dict[str, Any]) -> float:
    return (_ts(job["lease_expires_at"]) - _ts(job["claimed_at"])).total_seconds()


# --- fencing -------------------------------------------------------------------------------


def test_stale_attempt_is_409_even_with_the_same_token(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    first = worker.claim()
    assert first is not None and first["attempt"] == 1
    retried = worker.post(f"/jobs/{job['id']}/fail", {"error": "flaky", "retry_in": 0})
    assert retried.status_code == 200 and retried.get_json()["status"] == "pending"
    second = worker.claim()
    assert second is not None and (second["id"], second["attempt"]) == (job["id"], 2)
    for action, body in [
        ("complete", {"attempt": 1}),
        ("heartbeat", {"attempt": 1, "progress": 5}),
        ("fail", {"attempt": 1, "error": "late"}),
    ]:
        response = worker.post(f"/jobs/{job['id']}/{action}", body)
        assert response.status_code == 409, (action, response.get_json())
        assert "attempt 1 is stale" in response.get_json()["detail"]
    unchanged = worker.get(f"/jobs/{job['id']}").get_json()
    assert (unchanged["status"], unchanged["attempt"], unchanged["progress"]) == (
        "running",
        2,
        None,
    )
    done = worker.post(f"/jobs/{job['id']}/complete", {"attempt": 2})
    assert done.status_code == 200


def test_another_worker_cannot_touch_a_held_job(producer: Api, worker: Api, other_worker: Api):
    job = producer.enqueue()
    claimed = worker.claim()
    assert claimed is not None
    for action, body in [("complete", {}), ("heartbeat", {}), ("fail", {"error": "x"})]:
        response = other_worker.post(f"/jobs/{job['id']}/{action}", body)
        assert response.status_code == 409, response.get_json()
        assert "not held by you" in response.get_json()["detail"]
    assert worker.post("/jobs/999999/complete", {}).status_code == 404


def test_late_worker_cannot_complete_after_recovery_and_reclaim(queue: Queue) -> None:
    job = queue.enqueue()
    queue.claim(actor=queue.worker)
    later = T0 + timedelta(seconds=LEASE + 1)
    reclaimed = queue.claim(now=later, actor=queue.other_worker)
    assert reclaimed is not None and (reclaimed.id, reclaimed.attempts) == (job.id, 2)
    with pytest.raises(Conflict), queue.tx() as conn:
        reports.complete(conn, queue.worker, job.id, now=later)
    assert queue.job(job.id).worker_id == queue.other_worker.name


def test_holder_may_finish_after_its_lease_ran_out_if_nobody_reclaimed(queue: Queue) -> None:
    job = queue.enqueue()
    queue.claim()
    with queue.tx() as conn:
        done = reports.complete(
            conn, queue.worker, job.id, now=T0 + timedelta(seconds=LEASE * 3), attempt=1
        ).value
    assert done.status == "completed"


# --- heartbeats ----------------------------------------------------------------------------


def test_heartbeat_extends_the_lease_by_its_claimed_length_and_records_progress(
    queue: Queue,
) -> None:
    job = queue.enqueue()
    claimed = queue.claim(lease_seconds=60)
    assert claimed is not None and claimed.lease_expires_at == T0 + timedelta(seconds=60)
    beat_at = T0 + timedelta(seconds=50)
    with queue.tx() as conn:
        beaten = reports.heartbeat(
            conn,
            queue.worker,
            job.id,
            now=beat_at,
            settings=queue.settings,
            progress=40,
            message="halfway",
            attempt=1,
        ).value
    assert beaten.lease_expires_at == beat_at + timedelta(seconds=60)
    assert (beaten.progress, beaten.progress_message, beaten.status) == (40, "halfway", "running")
    # a claim after the original expiry but before the extended one recovers nothing
    assert queue.claim(now=T0 + timedelta(seconds=61), actor=queue.other_worker) is None
    assert queue.job(job.id).worker_id == queue.worker.name


def test_heartbeat_through_the_api(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    claimed = worker.claim()
    assert claimed is not None
    response = worker.post(
        f"/jobs/{job['id']}/heartbeat", {"progress": 40, "message": "halfway", "attempt": 1}
    )
    assert response.status_code == 200, response.get_json()
    beaten = response.get_json()
    assert beaten["progress"] == 40
    assert _ts(beaten["lease_expires_at"]) >= _ts(claimed["lease_expires_at"])
    assert producer.get(f"/jobs/{job['id']}").get_json()["progress"] == 40
    bad = worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 101})
    assert bad.status_code == 422


def test_heartbeat_on_a_cancelled_job_says_it_was_cancelled(
    producer: Api, worker: Api, admin: Api
) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    assert admin.post(f"/jobs/{job['id']}/cancel").status_code == 200
    response = worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 50, "attempt": 1})
    assert response.status_code == 409
    assert "cancelled" in response.get_json()["detail"]
    assert admin.get(f"/jobs/{job['id']}").get_json()["progress"] is None


# --- lease lengths -------------------------------------------------------------------------


def test_lease_per_claim_capped_by_max_lease_seconds(producer: Api, worker: Api) -> None:
    producer.enqueue()
    producer.enqueue()
    too_long = worker.post("/jobs/claim", {"lease_seconds": MAX_LEASE + 1})
    assert too_long.status_code == 422
    assert "lease_seconds" in too_long.get_json()["errors"]
    assert worker.post("/jobs/claim", {"lease_seconds": 0}).status_code == 422
    assert worker.post("/jobs/claim", {"lease_seconds": True}).status_code == 422
    claimed = worker.claim(lease_seconds=MAX_LEASE)
    assert claimed is not None and _lease(claimed) == MAX_LEASE
    claimed = worker.claim(lease_seconds=7)
    assert claimed is not None and _lease(claimed) == 7


def test_lease_per_type_and_default(producer: Api, worker: Api) -> None:
    report = producer.enqueue("report.build")
    email = producer.enqueue("email.send")
    first, second = worker.claim(), worker.claim()
    assert first is not None and second is not None
    leases = {first["id"]: _lease(first), second["id"]: _lease(second)}
    assert leases == {report["id"]: REPORT_LEASE, email["id"]: LEASE}


def test_per_claim_lease_overrides_the_type(producer: Api, worker: Api) -> None:
    producer.enqueue("report.build")
    claimed = worker.claim(lease_seconds=5)
    assert claimed is not None and _lease(claimed) == 5


def test_heartbeat_keeps_the_per_type_lease(queue: Queue) -> None:
    job = queue.enqueue(type="report.build")
    queue.claim()
    with queue.tx() as conn:
        beaten = reports.heartbeat(
            conn, queue.worker, job.id, now=T0 + timedelta(seconds=10), settings=queue.settings
        ).value
    assert beaten.lease_expires_at == T0 + timedelta(seconds=10 + REPORT_LEASE)


# --- recovery ------------------------------------------------------------------------------


def test_claim_recovers_an_expired_lease_as_a_failed_attempt(queue: Queue) -> None:
    job = queue.enqueue(max_retries=2)
    queue.claim(actor=queue.worker)
    at_expiry = T0 + timedelta(seconds=LEASE)
    assert queue.claim(now=at_expiry, actor=queue.other_worker) is None  # not yet: < is strict
    later = at_expiry + timedelta(microseconds=1)
    reclaimed = queue.claim(now=later, actor=queue.other_worker)
    assert reclaimed is not None
    assert (reclaimed.id, reclaimed.attempts, reclaimed.retry_count) == (job.id, 2, 1)
    assert reclaimed.worker_id == queue.other_worker.name
    events = queue.events(job.id)
    assert [e.kind for e in events] == ["enqueued", "claimed", "lease_expired", "claimed"]
    expired = events[2]
    assert (expired.from_status, expired.to_status, expired.actor) == ("running", "pending", None)
    assert expired.error == "lease expired"
    assert queue.worker.name in (expired.note or "")


def test_expired_lease_with_no_retry_left_fails_the_job(queue: Queue) -> None:
    job = queue.enqueue(max_retries=0)
    queue.claim()
    later = T0 + timedelta(seconds=LEASE + 1)
    with queue.tx() as conn:
        assert (
            claiming.recover_expired(conn, now=later, settings=queue.settings, limit=10).value == 1
        )
    failed = queue.job(job.id)
    assert (failed.status, failed.finished_at, failed.worker_id) == ("failed", later, None)
    assert failed.lease_expires_at is None
    last = queue.events(job.id)[-1]
    assert (last.kind, last.to_status) == ("lease_expired", "failed")


def test_recovery_is_batched(queue: Queue, app_config: dict[str, Any]) -> None:
    jobs = [queue.enqueue() for _ in range(5)]
    for _ in jobs:
        queue.claim()
    later = T0 + timedelta(seconds=LEASE + 1)
    with queue.tx() as conn:
        assert (
            claiming.recover_expired(conn, now=later, settings=queue.settings, limit=2).value == 2
        )
    with queue.tx() as conn:
        assert (
            claiming.recover_expired(conn, now=later, settings=queue.settings, limit=10).value == 3
        )
    assert {queue.job(j.id).status for j in jobs} == {"pending"}


def test_jobs_reap_recovers_expired_leases(queue: Queue, runner: FlaskCliRunner) -> None:
    """`flask jobs reap` reads the wall clock: claim "an hour ago" through the service's now."""
    hour_ago = utcnow() - timedelta(hours=1)
    live = queue.enqueue(now=hour_ago)
    assert queue.claim(now=utcnow() - timedelta(seconds=1)) == queue.job(live.id)
    expired = queue.enqueue(now=hour_ago, max_retries=0)
    assert queue.claim(now=hour_ago) == queue.job(expired.id)
    result = runner.invoke(args=["jobs", "reap"])
    assert result.exit_code == 0, result.output
    assert "recovered 1 expired lease(s)" in result.output
    assert queue.job(expired.id).status == "failed"
    assert queue.events(expired.id)[-1].kind == "lease_expired"
    assert queue.job(live.id).status == "running"
    again = runner.invoke(args=["jobs", "reap"])
    assert "recovered 0 expired lease(s)" in again.output
