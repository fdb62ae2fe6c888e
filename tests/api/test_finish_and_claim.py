"""``POST /jobs/finish`` with a ``claim``: the outcomes are applied and committed first, then
jobs are claimed as ``POST /jobs/claim`` would, in one round trip."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from flask import Flask

from app.infra import db
from tests.api.conftest import assert_problem, event_rows, snapshot
from tests.api.waiting import asleep, waits
from tests.builders import Api


def _finish(worker: Api, results: list[dict[str, Any]], **claim: Any) -> Any:
    body: dict[str, Any] = {"results": results}
    if claim:
        body["claim"] = claim
    return worker.post("/jobs/finish", body)


def _done(job: dict[str, Any]) -> dict[str, Any]:
    return {"id": job["id"], "attempt": job["attempt"], "outcome": "completed"}


def test_outcomes_then_the_next_jobs_in_one_answer(app: Flask, producer: Api, worker: Api) -> None:
    first, second, third = (producer.enqueue() for _ in range(3))
    held = worker.claim()
    assert held is not None and held["id"] == first["id"]
    response = _finish(worker, [_done(held)], max_jobs=2)
    assert response.status_code == 200
    answer = response.get_json()
    assert [(r["id"], r["status"], r["job"]["status"]) for r in answer["results"]] == [
        (first["id"], 200, "completed")
    ]
    assert [j["id"] for j in answer["jobs"]] == [second["id"], third["id"]]
    for job in answer["jobs"]:
        assert job["status"] == "running" and job["worker_id"] == "worker"
        assert job["attempt"] == 1 and job["lease_expires_at"] is not None
        assert [e["kind"] for e in event_rows(app, job["id"])] == ["enqueued", "claimed"]


def test_without_a_claim_the_answer_is_the_results_alone(producer: Api, worker: Api) -> None:
    producer.enqueue()
    held = worker.claim()
    assert held is not None
    answer = _finish(worker, [_done(held)]).get_json()
    assert set(answer) == {"results"}


def test_a_claim_alone_may_report_nothing(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    answer = _finish(worker, [], max_jobs=5).get_json()
    assert answer["results"] == [] and [j["id"] for j in answer["jobs"]] == [job["id"]]


def test_nothing_due_answers_an_empty_list_never_204(producer: Api, worker: Api) -> None:
    response = _finish(worker, [], max_jobs=3, wait_seconds=0.3)
    assert response.status_code == 200 and response.get_json()["jobs"] == []


def test_a_claim_alone_that_would_find_nothing_opens_no_write_transaction(
    app: Flask, worker: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing to report, a finish is a plain claim: once the process knows nothing is
    due, it waits without a write transaction (on SQLite one waits for the write lock)."""
    assert worker.post("/jobs/claim", {"wait_seconds": 0.2}).status_code == 204  # looked
    transactions = db.transactions(app)
    writes: list[object] = []
    write = transactions.write

    def counted(*args: Any, **kwargs: Any) -> Any:
        writes.append(args)
        return write(*args, **kwargs)

    monkeypatch.setattr(transactions, "write", counted)
    response = _finish(worker, [], max_jobs=2, wait_seconds=0.2)
    assert response.status_code == 200 and response.get_json() == {"results": [], "jobs": []}
    assert writes == []
    assert _finish(worker, [], max_jobs=2).get_json()["jobs"] == []  # no wait: it looks
    assert len(writes) == 1


def test_a_refused_claim_part_refuses_the_request_before_any_outcome(
    app: Flask, producer: Api, worker: Api
) -> None:
    producer.enqueue()
    held = worker.claim()
    assert held is not None
    before = snapshot(app)
    for claim, field in (
        ({"max_jobs": 2, "types": ["no.such.type"]}, "claim.types[0]"),
        ({"max_jobs": 0}, "claim.max_jobs"),
        ({"max_jobs": 2, "wait_seconds": 31}, "claim.wait_seconds"),
        ({"types": ["email.send"]}, "claim.max_jobs"),
        ({"max_jobs": 2, "worker_id": "me"}, "claim.worker_id"),
    ):
        response = worker.post("/jobs/finish", {"results": [_done(held)], "claim": claim})
        assert_problem(response, 422)
        assert field in response.get_json()["errors"], response.get_json()
    assert_problem(worker.post("/jobs/finish", {"results": []}), 422)  # nothing to do
    assert snapshot(app) == before


def test_the_claim_obeys_types_leases_and_fencing(producer: Api, worker: Api) -> None:
    producer.enqueue("report.build")
    email = producer.enqueue("email.send")
    answer = _finish(worker, [], max_jobs=5, types=["email.send"], lease_seconds=30).get_json()
    (claimed,) = answer["jobs"]
    assert claimed["id"] == email["id"] and claimed["type"] == "email.send"
    stale = {**_done(claimed), "attempt": claimed["attempt"] + 1}
    answer = _finish(worker, [stale], max_jobs=1, types=["email.send"]).get_json()
    assert answer["results"][0]["status"] == 409 and answer["jobs"] == []


def test_a_finish_that_releases_children_claims_them_at_once(producer: Api, worker: Api) -> None:
    parent = producer.enqueue()
    child = producer.enqueue(depends_on=[parent["id"]])
    held = worker.claim()
    assert held is not None and held["id"] == parent["id"]
    answer = _finish(worker, [_done(held)], max_jobs=1).get_json()
    assert [j["id"] for j in answer["jobs"]] == [child["id"]]


def test_the_claim_waits_for_a_job_after_the_outcomes_commit(
    app: Flask, producer: Api, worker: Api
) -> None:
    producer.enqueue()
    held = worker.claim()
    assert held is not None
    answer: dict[str, Any] = {}

    def finish_and_wait() -> None:
        own = Api(app.test_client(), worker.token)
        answer.update(_finish(own, [_done(held)], max_jobs=1, wait_seconds=10).get_json())

    waiting = threading.Thread(target=finish_and_wait)
    waiting.start()
    deadline = time.monotonic() + 5
    while producer.get(f"/jobs/{held['id']}").get_json()["status"] != "completed":
        assert time.monotonic() < deadline, "the outcome waited for the claim"
        time.sleep(0.02)
    job = producer.enqueue()
    waiting.join(10)
    assert [j["id"] for j in answer["jobs"]] == [job["id"]]
    assert answer["results"][0]["job"]["status"] == "completed"


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"LONG_POLL_PER_TOKEN": 1}


def test_beyond_the_long_poll_admission_the_jobs_are_empty_at_once(app: Flask, worker: Api) -> None:
    before = waits()
    holder = threading.Thread(
        target=lambda: Api(app.test_client(), worker.token).claim(wait_seconds=2)
    )
    holder.start()
    asleep(before, 1)  # the token's one wait is taken
    started = time.monotonic()
    response = _finish(worker, [], max_jobs=1, wait_seconds=10)
    assert time.monotonic() - started < 1.5
    assert response.status_code == 200 and response.get_json()["jobs"] == []
    assert response.headers["Retry-After"] == "1"
    holder.join(5)


def test_secrets_and_trace_reach_the_claimer_as_in_a_claim(producer: Api, worker: Api) -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    producer.post(
        "/jobs",
        {"type": "email.send", "secrets": {"api_key": "s3cr3t"}},
        headers={"traceparent": traceparent},
    )
    (job,) = _finish(worker, [], max_jobs=1).get_json()["jobs"]
    assert job["secrets"] == {"api_key": "s3cr3t"}
    assert job["trace"]["traceparent"] == traceparent
