"""``POST /jobs/finish``, ``POST /jobs/heartbeat`` and ``POST /jobs/{id}/release``: each item
answered as its single-job route would, fenced by the attempt, in one transaction."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.api.conftest import assert_problem, event_rows, job_row, snapshot
from tests.builders import Api


@pytest.fixture
def app_config() -> dict[str, Any]:
    """A small MAX_BATCH, so the limit is cheap to cross."""
    return {"MAX_BATCH": 5}


def _claimed(producer: Api, worker: Api, count: int) -> list[dict[str, Any]]:
    for _ in range(count):
        producer.enqueue()
    jobs: list[dict[str, Any]] = worker.post("/jobs/claim", {"max_jobs": count}).get_json()["jobs"]
    return jobs


def _statuses(response: Any) -> list[tuple[int, int]]:
    assert response.status_code == 200, response.get_json()
    return [(item["id"], item["status"]) for item in response.get_json()["results"]]


def test_finish_answers_each_item_in_request_order(
    app: Flask, producer: Api, worker: Api, other_worker: Api
) -> None:
    a, b, c, d = _claimed(producer, worker, 4)
    theirs = _claimed(producer, other_worker, 1)[0]
    results = [
        {"id": b["id"], "attempt": 1, "outcome": "completed", "result": {"ok": 1}},
        {"id": a["id"], "attempt": 1, "outcome": "failed", "error": "boom", "retryable": False},
        {"id": c["id"], "attempt": 2, "outcome": "completed"},  # stale attempt
        {"id": 999_999, "attempt": 1, "outcome": "completed"},
        {"id": d["id"], "attempt": 1, "outcome": "failed"},  # no error
    ]
    response = worker.post("/jobs/finish", {"results": results})
    assert _statuses(response) == [
        (b["id"], 200),
        (a["id"], 200),
        (c["id"], 409),
        (999_999, 404),
        (d["id"], 422),
    ]
    items = response.get_json()["results"]
    assert items[0]["job"]["status"] == "completed" and items[0]["job"]["result"] == {"ok": 1}
    assert items[1]["job"]["status"] == "failed"
    assert "stale" in items[2]["detail"] and "job" not in items[2]
    assert "error" in items[4]["detail"]
    assert job_row(app, c["id"])["status"] == "running"
    assert job_row(app, d["id"])["status"] == "running"
    # Someone else's job answers as the single route would, without revealing its state.
    other = worker.post(
        "/jobs/finish",
        {"results": [{"id": theirs["id"], "attempt": 1, "outcome": "completed"}]},
    )
    assert _statuses(other) == [(theirs["id"], 409)]
    assert "running" not in other.get_json()["results"][0]["detail"]
    assert job_row(app, theirs["id"])["status"] == "running"


def test_a_job_named_twice_in_one_finish_is_answered_in_order(
    app: Flask, producer: Api, worker: Api
) -> None:
    a, b = _claimed(producer, worker, 2)
    done = {"id": a["id"], "attempt": 1, "outcome": "completed"}
    retried = {"id": b["id"], "attempt": 1, "outcome": "failed", "error": "x", "retry_in": 60}
    response = worker.post(
        "/jobs/finish", {"results": [done, done, retried, done | {"id": b["id"]}]}
    )
    assert _statuses(response) == [(a["id"], 200), (a["id"], 409), (b["id"], 200), (b["id"], 409)]
    assert [e["kind"] for e in event_rows(app, a["id"])] == ["enqueued", "claimed", "completed"]
    assert job_row(app, b["id"])["status"] == "pending"


def test_a_refused_outcome_does_not_stand_for_a_later_one_of_the_same_job(
    app: Flask, producer: Api, worker: Api
) -> None:
    """The first outcome of the job is refused for its shape (422); the second applies."""
    (job,) = _claimed(producer, worker, 1)
    malformed = {"id": job["id"], "attempt": 1, "outcome": "completed", "error": "x"}
    done = {"id": job["id"], "attempt": 1, "outcome": "completed"}
    response = worker.post("/jobs/finish", {"results": [malformed, done]})
    assert _statuses(response) == [(job["id"], 422), (job["id"], 200)]
    assert job_row(app, job["id"])["status"] == "completed"


def test_finish_with_retries_goes_back_to_pending(producer: Api, worker: Api) -> None:
    (job,) = _claimed(producer, worker, 1)
    item = {"id": job["id"], "attempt": 1, "outcome": "failed", "error": "x", "retry_in": 0}
    response = worker.post("/jobs/finish", {"results": [item]})
    assert _statuses(response) == [(job["id"], 200)]
    again = response.get_json()["results"][0]["job"]
    assert again["status"] == "pending" and again["retry_count"] == 1
    # The same outcome again is now stale: the job is no longer held.
    assert _statuses(worker.post("/jobs/finish", {"results": [item]})) == [(job["id"], 409)]


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"results": []}, "results"),
        ({"results": [{"id": 1, "attempt": 1, "outcome": "completed"}] * 6}, "results"),
        ({"results": [{"id": 1, "outcome": "completed"}]}, "results[0].attempt"),
        ({"results": [{"id": 1, "attempt": 1, "outcome": "done"}]}, "results[0].outcome"),
        ({"results": [{"id": 1, "attempt": 1, "outcome": "completed", "x": 1}]}, "results[0].x"),
        ({"results": [{"id": "1", "attempt": 1, "outcome": "completed"}]}, "results[0].id"),
        ({"results": [{"id": 1, "attempt": 0, "outcome": "completed"}]}, "results[0].attempt"),
        ({"results": {"id": 1}}, "results"),
        ({"jobs": []}, "jobs"),
    ],
)
def test_finish_refuses_a_wrong_shape_whole(
    app: Flask, producer: Api, worker: Api, body: dict[str, Any], key: str
) -> None:
    _claimed(producer, worker, 1)
    before = snapshot(app)
    problem = assert_problem(worker.post("/jobs/finish", body), 422)
    assert key in problem["errors"], problem["errors"]
    assert snapshot(app) == before


def test_heartbeat_batch_extends_leases_and_says_when_cancelled(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    a, b, c = _claimed(producer, worker, 3)
    assert admin.post(f"/jobs/{c['id']}/cancel").status_code == 200
    beats = [
        {"id": a["id"], "attempt": 1, "progress": 40, "message": "half"},
        {"id": b["id"], "attempt": 7},
        {"id": c["id"], "attempt": 1},
        {"id": 999_999, "attempt": 1},
    ]
    response = worker.post("/jobs/heartbeat", {"jobs": beats})
    assert _statuses(response) == [(a["id"], 200), (b["id"], 409), (c["id"], 409), (999_999, 404)]
    items = response.get_json()["results"]
    assert items[0]["lease_expires_at"] >= a["lease_expires_at"]
    assert "cancelled" in items[2]["detail"]
    row = job_row(app, a["id"])
    assert row["progress"] == 40 and row["progress_message"] == "half"


def test_heartbeat_batch_hides_other_workers_jobs(
    producer: Api, worker: Api, other_worker: Api, admin: Api
) -> None:
    (theirs,) = _claimed(producer, other_worker, 1)
    admin.post(f"/jobs/{theirs['id']}/cancel")
    response = worker.post("/jobs/heartbeat", {"jobs": [{"id": theirs["id"], "attempt": 1}]})
    assert _statuses(response) == [(theirs["id"], 409)]
    assert "cancelled" not in response.get_json()["results"][0]["detail"]


@pytest.mark.parametrize(
    "jobs", [[], [{"id": 1, "attempt": 1}] * 6, [{"id": 1}], [{"id": 1, "attempt": 1, "p": 1}]]
)
def test_heartbeat_batch_refuses_a_wrong_shape(app: Flask, worker: Api, jobs: Any) -> None:
    before = snapshot(app)
    assert_problem(worker.post("/jobs/heartbeat", {"jobs": jobs}), 422)
    assert snapshot(app) == before


def test_release_hands_the_job_back_at_once(app: Flask, producer: Api, worker: Api) -> None:
    (job,) = _claimed(producer, worker, 1)
    response = worker.post(f"/jobs/{job['id']}/release", {"attempt": 1})
    assert response.status_code == 200, response.get_json()
    released = response.get_json()
    assert released["status"] == "pending" and released["retry_count"] == 0
    assert released["worker_id"] is None and released["lease_expires_at"] is None
    assert [e["kind"] for e in event_rows(app, job["id"])] == ["enqueued", "claimed", "released"]
    again = worker.claim()
    assert again is not None and again["id"] == job["id"] and again["attempt"] == 2
    assert_problem(worker.post(f"/jobs/{job['id']}/release", {"attempt": 1}), 409)


def test_release_is_fenced_and_validated(
    app: Flask, producer: Api, worker: Api, other_worker: Api
) -> None:
    (job,) = _claimed(producer, worker, 1)
    before = snapshot(app)
    for body, status in [
        ({"attempt": 2}, 409),
        ({}, 422),
        ({"attempt": "1"}, 422),
        ({"attempt": 1, "x": 1}, 422),
    ]:
        assert_problem(worker.post(f"/jobs/{job['id']}/release", body), status)
    assert_problem(other_worker.post(f"/jobs/{job['id']}/release", {"attempt": 1}), 409)
    assert_problem(worker.post("/jobs/999999/release", {"attempt": 1}), 404)
    assert snapshot(app) == before


def test_producers_cannot_finish_heartbeat_or_release(
    app: Flask, producer: Api, worker: Api
) -> None:
    (job,) = _claimed(producer, worker, 1)
    before = snapshot(app)
    item = {"id": job["id"], "attempt": 1}
    assert_problem(
        producer.post("/jobs/finish", {"results": [item | {"outcome": "completed"}]}), 403
    )
    assert_problem(producer.post("/jobs/heartbeat", {"jobs": [item]}), 403)
    assert_problem(producer.post(f"/jobs/{job['id']}/release", {"attempt": 1}), 403)
    assert snapshot(app) == before
