"""Uniqueness while active: POST /jobs and each POST /jobs/batch item with a ``unique_key``
answer the producer's pending or running job of that type and key with ``"duplicate": true``;
how it meets idempotency keys, ``run_at`` and ``unique_for``."""

from __future__ import annotations

from typing import Any

from flask import Flask

from app.queue.contract.job_responses import CreatedJobs, JobOut
from tests.api.conftest import assert_problem, job_count, job_row
from tests.builders import Api


def enqueue(api: Api, **fields: Any) -> tuple[int, dict[str, Any]]:
    response = api.post("/jobs", {"type": "email.send", **fields})
    body = response.get_json()
    if response.status_code in (200, 201):
        JobOut.model_validate(body)
    return response.status_code, body


def test_an_active_job_answers_a_second_enqueue(producer: Api, worker: Api, app: Flask) -> None:
    status, first = enqueue(producer, unique_key="user-7-digest", payload={"n": 1})
    assert status == 201 and "duplicate" not in first
    assert job_row(app, first["id"])["unique_key"] == "user-7-digest"
    status, again = enqueue(producer, unique_key="user-7-digest", payload={"n": 2})
    assert status == 200 and again["duplicate"] is True
    assert again | {"duplicate": None} == first | {"duplicate": None}  # the first job, unchanged
    assert worker.claim() is not None  # running still counts as active
    status, while_running = enqueue(producer, unique_key="user-7-digest")
    assert (status, while_running["id"], while_running["status"]) == (200, first["id"], "running")
    assert job_count(app) == 1


def test_other_types_producers_and_finished_jobs_do_not_count(
    producer: Api, other_producer: Api, worker: Api
) -> None:
    _, first = enqueue(producer, unique_key="k")
    assert enqueue(producer, unique_key="k", type="report.build")[0] == 201
    assert enqueue(other_producer, unique_key="k")[0] == 201
    assert enqueue(producer, unique_key="other")[0] == 201
    assert enqueue(producer)[0] == 201  # no key: no check
    producer.post(f"/jobs/{first['id']}/cancel")
    status, fresh = enqueue(producer, unique_key="k")
    assert status == 201 and fresh["id"] != first["id"]


def test_idempotency_keys_are_checked_first(producer: Api, worker: Api, app: Flask) -> None:
    """A repeated idempotency key answers the job it made (no duplicate flag); a duplicate adds
    nothing, so its own idempotency key stays unused; run_at of a duplicate is not applied."""
    _, first = enqueue(producer, unique_key="k", idempotency_key="req-1")
    replay = enqueue(producer, unique_key="k", idempotency_key="req-1")
    assert replay == (200, first)
    status, dup = enqueue(
        producer, unique_key="k", idempotency_key="req-2", run_at="2099-01-01T00:00:00Z"
    )
    assert (status, dup["id"], dup["duplicate"], dup["run_at"]) == (
        200, first["id"], True, first["run_at"],
    )  # fmt: skip
    other_request = {"type": "email.send", "unique_key": "x", "idempotency_key": "req-1"}
    assert "idempotency_key" in assert_problem(producer.post("/jobs", other_request), 422)["errors"]
    claimed = worker.claim()
    assert claimed is not None
    worker.post(f"/jobs/{first['id']}/complete", {"attempt": claimed["attempt"]})
    # the finished job no longer blocks the key, but its idempotency key still answers
    assert enqueue(producer, unique_key="k", idempotency_key="req-1")[1]["status"] == "completed"
    status, after = enqueue(producer, unique_key="k", idempotency_key="req-2")
    assert status == 201 and after["idempotency_key"] == "req-2"
    assert job_count(app) == 2


def test_batch_items_are_checked_one_by_one(producer: Api, app: Flask) -> None:
    _, first = enqueue(producer, unique_key="a")
    response = producer.post(
        "/jobs/batch",
        {
            "jobs": [
                {"type": "email.send", "unique_key": "a"},
                {"type": "email.send", "unique_key": "b"},
                {"type": "email.send", "unique_key": "b"},  # the item just before
                {"type": "email.send"},
            ]
        },
    )
    assert response.status_code == 201
    body = response.get_json()
    CreatedJobs.model_validate(body)
    assert body["created"] == [False, True, False, True]
    assert [job.get("duplicate") for job in body["jobs"]] == [True, None, True, None]
    assert body["jobs"][0]["id"] == first["id"]
    assert body["jobs"][2]["id"] == body["jobs"][1]["id"]
    again = {"jobs": [{"type": "email.send", "unique_key": "a"}]}
    only_duplicates = producer.post("/jobs/batch", again)
    assert only_duplicates.status_code == 200
    assert job_count(app) == 3


BAD_FIELDS = [
    ({"unique_key": ""}, "unique_key"),
    ({"unique_key": "has space"}, "unique_key"),
    ({"unique_key": "é"}, "unique_key"),
    ({"unique_key": "k" * 201}, "unique_key"),
    ({"unique_key": 7}, "unique_key"),
    ({"unique_for": 60}, "unique_for"),  # without a unique_key
    ({"unique_key": "k", "unique_for": 0}, "unique_for"),
    ({"unique_key": "k", "unique_for": -5}, "unique_for"),
    ({"unique_key": "k", "unique_for": "60"}, "unique_for"),
    ({"unique_key": "k", "unique_for": 10**9}, "unique_for"),
]


def test_bad_unique_fields_are_422_and_add_nothing(producer: Api, app: Flask) -> None:
    for fields, field in BAD_FIELDS:
        problem = assert_problem(producer.post("/jobs", {"type": "email.send", **fields}), 422)
        assert list(problem["errors"]) == [field], fields
        batch = producer.post("/jobs/batch", {"jobs": [{"type": "email.send", **fields}]})
        assert list(assert_problem(batch, 422)["errors"]) == [f"jobs[0].{field}"]
    assert job_count(app) == 0
