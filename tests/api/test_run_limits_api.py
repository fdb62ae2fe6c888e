"""max_run_seconds over HTTP: PATCH /types sets and clears it, the claim's answer and
GET /jobs/{id} carry the attempt's ``deadline_at``, and a late heartbeat or finish answers the
stale-attempt 409 while the time-out it caused stays committed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import update

from app.infra import db
from app.queue.contract.job_responses import JobOut
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import jobs
from tests.api.conftest import assert_problem, event_rows, job_row
from tests.builders import Api


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"JOB_TYPE_SETTINGS": {"report.build": {"max_run_seconds": 600}}}


def _patch(admin: Api, body: dict[str, Any]) -> dict[str, Any]:
    answer = admin.client.patch("/types/report.build", json=body, headers=admin.headers())
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()  # type: ignore[no-any-return]


def _overdue(app: Flask, job_id: int) -> None:
    """Edge the attempt's deadline into the past (as the clock would)."""
    with db.transaction(app) as conn:
        past = utcnow() - timedelta(seconds=1)
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(deadline_at=past))


def test_patch_sets_and_null_clears_the_override(admin: Api, producer: Api, worker: Api) -> None:
    assert _patch(admin, {"max_run_seconds": 30})["max_run_seconds"] == 30
    producer.enqueue("report.build")
    claimed = worker.claim()
    assert claimed is not None
    JobOut.model_validate(claimed)
    deadline = claimed["deadline_at"]
    assert deadline is not None and deadline > claimed["claimed_at"]
    assert producer.get(f"/jobs/{claimed['id']}").get_json()["deadline_at"] == deadline
    assert _patch(admin, {"max_run_seconds": None})["max_run_seconds"] == 600  # configured
    producer.enqueue("email.send")
    assert worker.claim()["deadline_at"] is None  # type: ignore[index]


def test_a_late_heartbeat_gets_409_and_the_attempt_is_retried(
    app: Flask, producer: Api, worker: Api
) -> None:
    job = producer.enqueue("report.build")
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == job["id"]
    body = {"attempt": claimed["attempt"], "progress": 10}
    assert worker.post(f"/jobs/{job['id']}/heartbeat", body).status_code == 200
    _overdue(app, job["id"])
    problem = assert_problem(worker.post(f"/jobs/{job['id']}/heartbeat", body), 409)
    assert "ran past its deadline" in problem["detail"]
    row = job_row(app, job["id"])
    assert (row["status"], row["retry_count"], row["worker_id"]) == ("pending", 1, None)
    assert event_rows(app, job["id"])[-1]["kind"] == "timed_out"
    late = {"attempt": claimed["attempt"], "result": {"done": True}}
    assert_problem(worker.post(f"/jobs/{job['id']}/complete", late), 409)  # no longer held


def test_a_late_batch_finish_is_refused_per_item(app: Flask, producer: Api, worker: Api) -> None:
    ids = [producer.enqueue("report.build")["id"] for _ in range(2)]
    claimed = worker.post("/jobs/claim", {"max_jobs": 2}).get_json()["jobs"]
    _overdue(app, ids[0])
    results = [{"id": j["id"], "attempt": j["attempt"], "outcome": "completed"} for j in claimed]
    answer = worker.post("/jobs/finish", {"results": results}).get_json()["results"]
    statuses = {item["id"]: item["status"] for item in answer}
    assert statuses == {ids[0]: 409, ids[1]: 200}
    assert job_row(app, ids[0])["status"] == "pending"
    assert job_row(app, ids[1])["status"] == "completed"
