"""``POST /jobs/{id}/run-now``: its producer or an admin makes a pending job that waits for its
run_at or a backoff due at once (event ``run_now``, audited, waiting workers woken); 409 when
the job is not pending, is due already, or something other than time holds it; 404 for a job
the caller may not see. On SQLite and PostgreSQL (tests/api/conftest)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from datetime import datetime
from typing import Any

import pytest
from flask import Flask

from app.queue.vocabulary.timeutil import utcnow
from tests.api.conftest import LiveServer, assert_problem, event_rows, finish, job_row
from tests.api.test_edit_retry import audit_rows, everything
from tests.builders import Api


@pytest.fixture
def app_config() -> dict[str, Any]:
    """A long backoff (a failed attempt waits an hour), and flow limits to be held by."""
    return {
        "BACKOFF_BASE_SECONDS": 3600,
        "JOB_TYPE_SETTINGS": {"report.build": {"max_running": 1}},
    }


def _run_now(caller: Api, job: dict[str, Any]) -> Any:
    return caller.post(f"/jobs/{job['id']}/run-now")


def test_the_owner_runs_a_scheduled_job_now(app: Flask, producer: Api, worker: Api) -> None:
    job = producer.enqueue(delay_seconds=3600)
    assert worker.claim() is None
    before = utcnow()
    answer = _run_now(producer, job)
    assert answer.status_code == 200, answer.get_json()
    ran = answer.get_json()
    assert ran["status"] == "pending"
    assert before <= datetime.fromisoformat(ran["run_at"]) <= utcnow()
    last = event_rows(app, job["id"])[-1]
    assert (last["kind"], last["from_status"], last["to_status"], last["actor"]) == (
        "run_now",
        "pending",
        "pending",
        "producer",
    )
    audit = audit_rows(app)[-1]
    assert (audit["action"], audit["target"], audit["actor"]) == (
        "job_run_now",
        f"job:{job['id']}",
        "producer",
    )
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == job["id"]


def test_an_admin_runs_a_backing_off_job_now(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = producer.enqueue(max_retries=3)
    held = worker.claim()
    assert held is not None
    assert worker.post(f"/jobs/{job['id']}/fail", {"error": "boom"}).status_code == 200
    assert job_row(app, job["id"])["retry_count"] == 1 and worker.claim() is None
    assert _run_now(admin, job).status_code == 200
    again = worker.claim()
    assert again is not None and (again["id"], again["attempt"]) == (job["id"], 2)


def _claim_over_http(server: LiveServer, token: str | None, wait: int) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request(
            "POST",
            "/jobs/claim",
            body=json.dumps({"wait_seconds": wait}),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def test_a_waiting_claim_is_woken(live_server: LiveServer, producer: Api, worker: Api) -> None:
    job = producer.enqueue(delay_seconds=3600)
    answers: list[Any] = []
    waiter = threading.Thread(
        target=lambda: answers.append(_claim_over_http(live_server, worker.token, 20))
    )
    started = time.monotonic()
    waiter.start()
    time.sleep(0.5)  # the claim waits
    assert _run_now(producer, job).status_code == 200
    waiter.join(25)
    status, body = answers[0]
    assert (status, body["id"]) == (200, job["id"])
    assert time.monotonic() - started < 10  # woken, not at the end of its 20 s wait


def test_other_producers_get_404_as_for_a_job_that_does_not_exist(
    app: Flask, producer: Api, other_producer: Api
) -> None:
    job = producer.enqueue(delay_seconds=3600)
    before = everything(app)
    theirs = assert_problem(_run_now(other_producer, job), 404)
    missing = assert_problem(other_producer.post("/jobs/999999/run-now"), 404)
    assert theirs["detail"].replace(str(job["id"]), "N") == missing["detail"].replace("999999", "N")
    assert everything(app) == before


@pytest.mark.parametrize(("caller", "status"), [("worker", 403), ("anonymous", 401)])
def test_workers_and_anonymous_callers_are_refused(
    app: Flask, request: pytest.FixtureRequest, producer: Api, caller: str, status: int
) -> None:
    job = producer.enqueue(delay_seconds=3600)
    api: Api = request.getfixturevalue(caller)
    before = everything(app)
    assert_problem(_run_now(api, job), status)
    assert everything(app) == before


def _running(producer: Api, worker: Api) -> dict[str, Any]:
    job = producer.enqueue()
    assert worker.claim() is not None
    return job


def _finished(producer: Api, worker: Api) -> dict[str, Any]:
    job = _running(producer, worker)
    finish(worker, job_row_of(worker, job))
    return job


def job_row_of(worker: Api, job: dict[str, Any]) -> dict[str, Any]:
    found = worker.get(f"/jobs/{job['id']}").get_json()
    return {"id": found["id"], "attempt": found["attempt"]}


def _cancelled(producer: Api, worker: Api) -> dict[str, Any]:
    job = producer.enqueue(delay_seconds=3600)
    assert producer.post(f"/jobs/{job['id']}/cancel").status_code == 200
    return job


def _due(producer: Api, worker: Api) -> dict[str, Any]:
    return producer.enqueue()


def _waiting_for_a_parent(producer: Api, worker: Api) -> dict[str, Any]:
    parent = producer.enqueue(delay_seconds=3600)
    return producer.enqueue(delay_seconds=3600, depends_on=[parent["id"]])


NOT_TIME = {
    "running": (_running, "only pending jobs"),
    "completed": (_finished, "only pending jobs"),
    "cancelled": (_cancelled, "only pending jobs"),
    "due already": (_due, "already due"),
    "waiting for a parent": (_waiting_for_a_parent, "parent job"),
}


@pytest.mark.parametrize(("make", "says"), NOT_TIME.values(), ids=NOT_TIME)
def test_409_when_time_is_not_what_holds_the_job(
    app: Flask, producer: Api, worker: Api, admin: Api, make: Any, says: str
) -> None:
    job = make(producer, worker)
    before = everything(app)
    for caller in (producer, admin):
        assert says in assert_problem(_run_now(caller, job), 409)["detail"]
    assert everything(app) == before


def test_409_when_its_type_is_paused(app: Flask, producer: Api, admin: Api) -> None:
    job = producer.enqueue(delay_seconds=3600)
    assert (
        admin.client.patch(
            "/types/email.send", json={"paused": True}, headers=admin.headers()
        ).status_code
        == 200
    )
    before = everything(app)
    assert "paused" in assert_problem(_run_now(producer, job), 409)["detail"]
    assert everything(app) == before


def test_409_when_its_type_runs_as_many_jobs_as_it_may(
    app: Flask, producer: Api, worker: Api
) -> None:
    producer.enqueue("report.build")
    assert worker.claim() is not None  # report.build's one running job
    job = producer.enqueue("report.build", delay_seconds=3600)
    before = everything(app)
    assert "max_running" in assert_problem(_run_now(producer, job), 409)["detail"]
    assert everything(app) == before


HOSTILE = {
    "a field": {"run_at": "2000-01-01T00:00:00Z"},
    "a list": [1],
    "a string": "now",
    "deep": {"a": {"b": {"c": 1}}},
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=HOSTILE)
def test_run_now_takes_no_body(app: Flask, producer: Api, body: Any) -> None:
    job = producer.enqueue(delay_seconds=3600)
    before = everything(app)
    response = _run_now_with(producer, job, body)
    assert response.status_code in (400, 422)
    assert everything(app) == before


def _run_now_with(caller: Api, job: dict[str, Any], body: Any) -> Any:
    return caller.post(f"/jobs/{job['id']}/run-now", body)
