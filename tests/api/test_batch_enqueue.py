"""``POST /jobs/batch``: many jobs in one transaction, all or nothing, in request order."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.api.conftest import assert_problem, event_rows, job_count, snapshot
from tests.builders import Api, make_api


@pytest.fixture
def app_config() -> dict[str, Any]:
    """A small MAX_BATCH, so the limit is cheap to cross."""
    return {"MAX_BATCH": 5}


def _batch(caller: Api, jobs: Any) -> Any:
    return caller.post("/jobs/batch", {"jobs": jobs})


def test_a_batch_is_stored_in_request_order(app: Flask, producer: Api) -> None:
    items = [
        {"type": "report.build", "payload": {"n": 1}},
        {"type": "email.send", "priority": "medium", "max_retries": 0},
        {"type": "webhook.deliver", "delay_seconds": 60},
    ]
    response = _batch(producer, items)
    assert response.status_code == 201
    body = response.get_json()
    assert body["created"] == [True, True, True]
    assert [j["type"] for j in body["jobs"]] == [i["type"] for i in items]
    assert body["jobs"][0]["payload"] == {"n": 1}
    assert body["jobs"][1]["priority"] == "medium" and body["jobs"][1]["max_retries"] == 0
    assert body["jobs"][2]["run_at"] > body["jobs"][2]["created_at"]
    ids = [j["id"] for j in body["jobs"]]
    assert ids == sorted(ids) and job_count(app) == 3
    for job in body["jobs"]:
        assert [e["kind"] for e in event_rows(app, job["id"])] == ["enqueued"]
        assert producer.get(f"/jobs/{job['id']}").get_json() == job


def test_per_item_idempotency(app: Flask, producer: Api) -> None:
    first = producer.enqueue(idempotency_key="k1", payload={"a": 1})
    response = _batch(
        producer,
        [
            {"type": "email.send", "idempotency_key": "k1", "payload": {"a": 1}},
            {"type": "email.send", "idempotency_key": "k2"},
            {"type": "email.send", "idempotency_key": "k2"},  # the same key twice in one batch
        ],
    )
    assert response.status_code == 201
    body = response.get_json()
    assert body["created"] == [False, True, False]
    assert body["jobs"][0]["id"] == first["id"]
    assert body["jobs"][1]["id"] == body["jobs"][2]["id"]
    assert job_count(app) == 2
    again = _batch(producer, [{"type": "email.send", "idempotency_key": "k2"}])
    assert again.status_code == 200 and again.get_json()["created"] == [False]


def test_replays_new_jobs_and_repeats_keep_request_order(app: Flask, producer: Api) -> None:
    stored = producer.enqueue(idempotency_key="old", payload={"n": 0})
    items = [
        {"type": "email.send", "payload": {"n": 1}},
        {"type": "email.send", "payload": {"n": 0}, "idempotency_key": "old"},
        {"type": "email.send", "payload": {"n": 2}, "idempotency_key": "new"},
        {"type": "email.send", "payload": {"n": 3}},
        {"type": "email.send", "payload": {"n": 2}, "idempotency_key": "new"},
    ]
    body = _batch(producer, items).get_json()
    assert body["created"] == [True, False, True, True, False]
    assert [job["payload"]["n"] for job in body["jobs"]] == [1, 0, 2, 3, 2]
    assert body["jobs"][1] == stored and body["jobs"][4] == body["jobs"][2]
    for job in body["jobs"]:
        assert producer.get(f"/jobs/{job['id']}").get_json() == job
        assert [e["kind"] for e in event_rows(app, job["id"])] == ["enqueued"]
    assert job_count(app) == 4


def test_a_key_repeated_in_one_batch_with_another_request_is_named(
    app: Flask, producer: Api
) -> None:
    items = [
        {"type": "email.send", "idempotency_key": "k"},
        {"type": "email.send"},
        {"type": "report.build", "idempotency_key": "k"},
    ]
    body = assert_problem(_batch(producer, items), 422)
    assert list(body["errors"]) == ["jobs[2].idempotency_key"]
    assert job_count(app) == 0


def test_a_key_reused_with_a_different_request_refuses_the_whole_batch(
    app: Flask, producer: Api
) -> None:
    producer.enqueue(idempotency_key="k1")
    before = snapshot(app)
    response = _batch(
        producer,
        [
            {"type": "email.send"},
            {"type": "report.build", "idempotency_key": "k1"},
        ],
    )
    body = assert_problem(response, 422)
    assert "jobs[1].idempotency_key" in body["errors"]
    assert snapshot(app) == before


def test_one_bad_item_stores_nothing_and_is_named(app: Flask, producer: Api) -> None:
    good = {"type": "email.send"}
    for bad, key in [
        ({"type": "nope"}, "jobs[3].type"),
        ({"type": "email.send", "priority": "urgent"}, "jobs[3].priority"),
        ({"type": "email.send", "bogus": 1}, "jobs[3].bogus"),
        ({"type": "email.send", "payload": []}, "jobs[3].payload"),
        ({}, "jobs[3].type"),
    ]:
        body = assert_problem(_batch(producer, [good, good, good, bad]), 422)
        assert key in body["errors"], body["errors"]
    assert job_count(app) == 0


@pytest.mark.parametrize("jobs", [[], [{"type": "email.send"}] * 6, "x", None, {"a": 1}, [1]])
def test_bad_shapes_and_sizes_are_422(app: Flask, producer: Api, jobs: Any) -> None:
    body = assert_problem(_batch(producer, jobs), 422)
    assert any(key.startswith("jobs") for key in body["errors"])
    assert job_count(app) == 0


def test_max_batch_items_are_accepted(app: Flask, producer: Api) -> None:
    assert _batch(producer, [{"type": "email.send"}] * 5).status_code == 201
    assert job_count(app) == 5


def test_an_item_above_the_cap_is_403_naming_it(app: Flask, client: Any) -> None:
    capped = make_api(app, client, "capped", "producer", max_priority="medium")
    items = [{"type": "email.send"}, {"type": "email.send", "priority": "critical"}]
    body = assert_problem(_batch(capped, items), 403)
    assert body["detail"] == "jobs[1]: priority is above your cap"
    assert job_count(app) == 0


def test_workers_cannot_batch_enqueue(app: Flask, worker: Api, anonymous: Api) -> None:
    assert_problem(_batch(worker, [{"type": "email.send"}]), 403)
    assert_problem(_batch(anonymous, [{"type": "email.send"}]), 401)
    assert job_count(app) == 0


def test_admins_batch_enqueue_any_priority(admin: Api) -> None:
    response = _batch(admin, [{"type": "email.send", "priority": "critical"}])
    assert response.status_code == 201
