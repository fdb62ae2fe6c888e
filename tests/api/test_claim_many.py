"""``POST /jobs/claim`` with ``types`` and ``max_jobs``, alone and long-polling."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from flask import Flask

from tests.api.conftest import assert_problem, event_rows, snapshot
from tests.builders import Api


def _claim(worker: Api, **fields: Any) -> Any:
    return worker.post("/jobs/claim", fields)


def test_max_jobs_claims_in_claim_order_each_with_its_own_attempt(
    app: Flask, producer: Api, worker: Api
) -> None:
    low = [producer.enqueue() for _ in range(3)]
    high = producer.enqueue(priority="medium")
    response = _claim(worker, max_jobs=3)
    assert response.status_code == 200
    claimed = response.get_json()["jobs"]
    assert [j["id"] for j in claimed] == [high["id"], low[0]["id"], low[1]["id"]]
    for job in claimed:
        assert job["status"] == "running" and job["worker_id"] == "worker"
        assert job["attempt"] == 1 and job["lease_expires_at"] is not None
        kinds = [e["kind"] for e in event_rows(app, job["id"])]
        assert kinds == ["enqueued", "claimed"]
    rest = _claim(worker, max_jobs=100).get_json()["jobs"]
    assert [j["id"] for j in rest] == [low[2]["id"]]
    assert _claim(worker, max_jobs=5).status_code == 204


def test_without_max_jobs_the_answer_is_one_job(producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    producer.enqueue()
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == job["id"]
    assert "jobs" not in claimed


def test_types_hands_out_only_those_types(producer: Api, worker: Api) -> None:
    email = producer.enqueue("email.send")
    report = producer.enqueue("report.build", priority="medium")
    webhook = producer.enqueue("webhook.deliver")
    claimed = worker.claim(types=["email.send", "webhook.deliver"])
    assert claimed is not None and claimed["id"] == email["id"]
    more = _claim(worker, types=["webhook.deliver", "email.send"], max_jobs=10).get_json()
    assert [j["id"] for j in more["jobs"]] == [webhook["id"]]
    assert worker.claim(types=["email.send"]) is None
    last = worker.claim(types=["report.build"])
    assert last is not None and last["id"] == report["id"]


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"types": ["email.send", "nope"]}, "types[1]"),
        ({"types": []}, "types"),
        ({"types": "email.send"}, "types"),
        ({"types": [1]}, "types[0]"),
        ({"max_jobs": 0}, "max_jobs"),
        ({"max_jobs": 101}, "max_jobs"),
        ({"max_jobs": 2.0}, "max_jobs"),
        ({"max_jobs": True}, "max_jobs"),
        ({"max_jobs": "3"}, "max_jobs"),
    ],
)
def test_bad_types_and_max_jobs_are_422(
    app: Flask, producer: Api, worker: Api, fields: dict[str, Any], key: str
) -> None:
    producer.enqueue()
    before = snapshot(app)
    body = assert_problem(_claim(worker, **fields), 422)
    assert key in body["errors"], body["errors"]
    assert snapshot(app) == before


def test_producers_cannot_claim_many(app: Flask, producer: Api) -> None:
    producer.enqueue()
    before = snapshot(app)
    assert_problem(_claim(producer, max_jobs=5), 403)
    assert snapshot(app) == before


def test_a_long_poll_with_max_jobs_is_woken_by_a_batch_enqueue(
    app: Flask, producer: Api, worker: Api
) -> None:
    own = Api(app.test_client(), worker.token)
    outcome: dict[str, Any] = {}

    def wait() -> None:
        outcome["response"] = own.post(
            "/jobs/claim", {"max_jobs": 10, "wait_seconds": 20, "types": ["report.build"]}
        )
        outcome["at"] = time.monotonic()

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.3)
    batch = producer.post(
        "/jobs/batch", {"jobs": [{"type": "report.build"}] * 4 + [{"type": "email.send"}]}
    )
    enqueued = time.monotonic()
    assert batch.status_code == 201
    thread.join(40)
    assert not thread.is_alive()
    response = outcome["response"]
    assert response.status_code == 200
    claimed = response.get_json()["jobs"]
    assert [j["id"] for j in claimed] == [j["id"] for j in batch.get_json()["jobs"][:4]]
    assert outcome["at"] - enqueued < 2.0


def test_a_long_poll_with_max_jobs_answers_204_after_the_wait(worker: Api) -> None:
    start = time.monotonic()
    assert _claim(worker, max_jobs=5, wait_seconds=0.3).status_code == 204
    assert time.monotonic() - start >= 0.3
