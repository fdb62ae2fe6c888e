"""The JSON API contract of docs/api.md: shapes, status codes, ordering, paging, transitions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming
from tests.api.conftest import assert_problem, event_rows, job_count, job_row, snapshot
from tests.builders import Api

JOB_KEYS = [
    "id",
    "type",
    "payload",
    "priority",
    "status",
    "retry_count",
    "max_retries",
    "attempt",
    "idempotency_key",
    "run_at",
    "claimed_at",
    "lease_expires_at",
    "worker_id",
    "progress",
    "progress_message",
    "result",
    "created_at",
    "updated_at",
    "finished_at",
    "secret_names",
    "deadline_at",
    "depends_on",
    "waiting_for",
    "group_id",
    "parent_id",
    "trace",
    "partition",
]
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def test_enqueue_answers_201_with_location_and_the_job(producer: Api) -> None:
    response = producer.post("/jobs", {"type": "report.build", "payload": {"n": 1}})
    assert response.status_code == 201
    job = response.get_json()
    assert response.headers["Location"].endswith(f"/jobs/{job['id']}")
    assert producer.get(response.headers["Location"]).get_json() == job
    assert list(job) == JOB_KEYS
    assert job["type"] == "report.build"
    assert job["payload"] == {"n": 1}
    assert (job["priority"], job["status"], job["max_retries"]) == ("low", "pending", 3)
    assert (job["retry_count"], job["attempt"], job["progress"]) == (0, 0, None)
    assert job["worker_id"] is job["claimed_at"] is job["finished_at"] is job["result"] is None
    for key in ("run_at", "created_at", "updated_at"):
        assert ISO_Z.match(job[key]), job[key]
    assert job["run_at"] == job["created_at"]


def test_job_timestamps_are_utc_z_through_a_life(producer: Api, worker: Api) -> None:
    producer.enqueue()
    job = worker.claim()
    assert job is not None
    for key in ("claimed_at", "lease_expires_at"):
        assert ISO_Z.match(job[key])
    done = worker.post(f"/jobs/{job['id']}/complete", {"result": {"ok": 1}}).get_json()
    assert ISO_Z.match(done["finished_at"])
    assert done["result"] == {"ok": 1}
    assert done["progress"] == 100


def test_claim_answers_204_when_nothing_is_claimable(producer: Api, worker: Api) -> None:
    empty = worker.post("/jobs/claim")
    assert empty.status_code == 204
    assert empty.get_data() == b""
    producer.enqueue(delay_seconds=3600)
    assert worker.post("/jobs/claim", {}).status_code == 204
    job = producer.enqueue()
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == job["id"]
    assert worker.post("/jobs/claim").status_code == 204


def test_claim_order_is_priority_then_run_at_then_id(app: Flask, admin: Api, worker: Api) -> None:
    now = datetime.now(UTC)
    at = {name: _iso(now - timedelta(seconds=s)) for name, s in [("old", 60), ("new", 10)]}
    enqueued = {
        "low-old": admin.enqueue(priority="low", run_at=at["old"]),
        "high-new-1": admin.enqueue(priority="high", run_at=at["new"]),
        "high-old": admin.enqueue(priority="high", run_at=at["old"]),
        "high-new-2": admin.enqueue(priority="high", run_at=at["new"]),
        "medium-now": admin.enqueue(priority="medium"),
        "critical-new": admin.enqueue(priority="critical", run_at=at["new"]),
        "critical-future": admin.enqueue(
            priority="critical", run_at=_iso(now + timedelta(hours=1))
        ),
        "low-new": admin.enqueue(priority="low", run_at=at["new"]),
    }
    names = {job["id"]: name for name, job in enqueued.items()}
    order = []
    while (job := worker.claim()) is not None:
        order.append(names[job["id"]])
    assert order == [
        "critical-new",
        "high-old",
        "high-new-1",
        "high-new-2",
        "medium-now",
        "low-old",
        "low-new",
    ]
    assert job_row(app, enqueued["critical-future"]["id"])["status"] == "pending"


def test_equal_jobs_are_fifo(producer: Api, worker: Api) -> None:
    ids = [producer.enqueue()["id"] for _ in range(5)]
    claimed = []
    for _ in ids:
        job = worker.claim()
        assert job is not None
        claimed.append(job["id"])
    assert claimed == ids


def test_claim_returns_a_running_job_with_a_lease(producer: Api, worker: Api) -> None:
    producer.enqueue()
    job = worker.claim(lease_seconds=120)
    assert job is not None
    assert (job["status"], job["worker_id"], job["attempt"]) == ("running", "worker", 1)
    lease = _parse(job["lease_expires_at"]) - _parse(job["claimed_at"])
    assert lease == timedelta(seconds=120)


# Paging -------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 3, 7, 23, 1000])
def test_cursor_walks_all_jobs_newest_first(producer: Api, limit: int) -> None:
    ids = [producer.enqueue()["id"] for _ in range(23)]
    seen: list[int] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": str(limit)} | ({"cursor": cursor} if cursor else {})
        page = producer.get("/jobs", query_string=query).get_json()
        assert set(page) == {"jobs", "next_cursor"}
        assert len(page["jobs"]) <= limit
        seen += [job["id"] for job in page["jobs"]]
        cursor = page["next_cursor"]
        pages += 1
        if cursor is None:
            break
        assert isinstance(cursor, str) and not cursor.isdigit()
        assert pages <= len(ids)
    assert seen == sorted(ids, reverse=True)
    assert pages == -(-len(ids) // limit)


def test_default_limit_is_50(producer: Api) -> None:
    for _ in range(51):
        producer.enqueue()
    page = producer.get("/jobs").get_json()
    assert len(page["jobs"]) == 50
    rest = producer.get("/jobs", query_string={"cursor": page["next_cursor"]}).get_json()
    assert len(rest["jobs"]) == 1 and rest["next_cursor"] is None


def test_paging_with_filters(producer: Api, worker: Api) -> None:
    emails = [producer.enqueue("email.send")["id"] for _ in range(5)]
    reports = [producer.enqueue("report.build")["id"] for _ in range(5)]
    assert worker.claim() is not None  # the oldest email is now running
    seen, cursor = [], None
    while True:
        query = {"type": "email.send", "status": "pending", "limit": "2"}
        page = producer.get("/jobs", query_string=query | ({"cursor": cursor} if cursor else {}))
        body = page.get_json()
        seen += [j["id"] for j in body["jobs"]]
        assert all(j["type"] == "email.send" and j["status"] == "pending" for j in body["jobs"])
        if (cursor := body["next_cursor"]) is None:
            break
    assert seen == sorted(emails[1:], reverse=True)
    by_priority = producer.get("/jobs", query_string={"priority": "low"}).get_json()["jobs"]
    assert {j["id"] for j in by_priority} == set(emails + reports)
    assert producer.get("/jobs", query_string={"priority": "high"}).get_json()["jobs"] == []


def test_a_job_added_while_paging_causes_no_duplicates_or_gaps(producer: Api) -> None:
    ids = [producer.enqueue()["id"] for _ in range(6)]
    first = producer.get("/jobs", query_string={"limit": "3"}).get_json()
    producer.enqueue()  # newer than everything: must not shift the next page
    second = producer.get(
        "/jobs", query_string={"limit": "3", "cursor": first["next_cursor"]}
    ).get_json()
    walked = [j["id"] for j in first["jobs"] + second["jobs"]]
    assert walked == sorted(ids, reverse=True)


# Transitions and events ---------------------------------------------------------------------


def test_fail_with_retries_left_goes_back_to_pending(
    app: Flask, producer: Api, worker: Api
) -> None:
    job = producer.enqueue(max_retries=2)
    for retry in (1, 2):
        held = worker.claim()
        assert held is not None and held["attempt"] == retry
        response = worker.post(f"/jobs/{job['id']}/fail", {"error": "boom", "retry_in": 0})
        again = response.get_json()
        assert response.status_code == 200
        assert (again["status"], again["retry_count"]) == ("pending", retry)
        assert again["worker_id"] is again["claimed_at"] is again["lease_expires_at"] is None
        row = job_row(app, job["id"])
        assert row["worker_id"] is None and row["claimed_at"] is None
    held = worker.claim()
    assert held is not None and held["attempt"] == 3
    final = worker.post(f"/jobs/{job['id']}/fail", {"error": "boom"}).get_json()
    assert (final["status"], final["retry_count"], final["attempt"]) == ("failed", 2, 3)
    assert final["finished_at"] is not None and final["worker_id"] is None
    assert worker.post("/jobs/claim").status_code == 204


def test_fail_schedules_the_retry_after_a_backoff(producer: Api, worker: Api) -> None:
    job = producer.enqueue(max_retries=1)
    held = worker.claim()
    assert held is not None
    again = worker.post(f"/jobs/{job['id']}/fail", {"error": "x", "retry_in": 600}).get_json()
    delay = _parse(again["run_at"]) - _parse(again["updated_at"])
    assert delay == timedelta(seconds=600)
    assert worker.post("/jobs/claim").status_code == 204


def test_fail_not_retryable_fails_at_once(producer: Api, worker: Api) -> None:
    job = producer.enqueue(max_retries=5)
    assert worker.claim() is not None
    done = worker.post(f"/jobs/{job['id']}/fail", {"error": "bad input", "retryable": False})
    assert (done.get_json()["status"], done.get_json()["retry_count"]) == ("failed", 0)


def _event_signature(app: Flask, job_id: int) -> list[tuple[str | None, str, str, str | None]]:
    return [
        (e["from_status"], e["to_status"], e["kind"], e["actor"]) for e in event_rows(app, job_id)
    ]


def test_every_transition_writes_an_event(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = producer.enqueue(max_retries=1)
    job_id = job["id"]
    steps: list[tuple[Any, tuple[str | None, str, str, str | None]]] = [
        (lambda: None, (None, "pending", "enqueued", "producer")),
        (lambda: worker.claim(), ("pending", "running", "claimed", "worker")),
        (
            lambda: worker.post(f"/jobs/{job_id}/fail", {"error": "e", "retry_in": 0}),
            ("running", "pending", "retry_scheduled", "worker"),
        ),
        (lambda: worker.claim(), ("pending", "running", "claimed", "worker")),
        (
            lambda: worker.post(f"/jobs/{job_id}/fail", {"error": "e"}),
            ("running", "failed", "failed", "worker"),
        ),
        (
            lambda: admin.post(f"/jobs/{job_id}/retry"),
            ("failed", "pending", "retried", "admin"),
        ),
        (
            lambda: producer.post(f"/jobs/{job_id}/cancel"),
            ("pending", "cancelled", "cancelled", "producer"),
        ),
        (lambda: admin.post(f"/jobs/{job_id}/retry"), ("cancelled", "pending", "retried", "admin")),
        (lambda: worker.claim(), ("pending", "running", "claimed", "worker")),
        (
            lambda: admin.post(f"/jobs/{job_id}/cancel"),
            ("running", "cancelled", "cancelled", "admin"),
        ),
        (lambda: admin.post(f"/jobs/{job_id}/retry"), ("cancelled", "pending", "retried", "admin")),
        (lambda: worker.claim(), ("pending", "running", "claimed", "worker")),
        (
            lambda: worker.post(f"/jobs/{job_id}/complete"),
            ("running", "completed", "completed", "worker"),
        ),
    ]
    expected = []
    for action, event in steps:
        result = action()
        if hasattr(result, "status_code"):
            assert result.status_code == 200, result.get_json()
        expected.append(event)
        assert _event_signature(app, job_id) == expected
    api_events = admin.get(f"/jobs/{job_id}/events").get_json()["events"]
    assert [(e["from_status"], e["to_status"], e["kind"], e["actor"]) for e in api_events] == [
        *expected
    ]
    attempts = [e["attempt"] for e in api_events if e["kind"] == "claimed"]
    assert attempts == sorted(attempts) and len(set(attempts)) == len(attempts)


def test_heartbeat_is_not_a_transition_but_extends_the_lease(
    app: Flask, producer: Api, worker: Api
) -> None:
    job = producer.enqueue()
    held = worker.claim(lease_seconds=30)
    assert held is not None
    events = len(event_rows(app, job["id"]))
    beat = worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 40, "message": "a third"})
    body = beat.get_json()
    assert beat.status_code == 200
    assert body["progress"] == 40 and body["status"] == "running"
    seen = producer.get(f"/jobs/{job['id']}").get_json()  # the message the job page shows
    assert (seen["progress"], seen["progress_message"]) == (40, "a third")
    assert _parse(body["lease_expires_at"]) >= _parse(held["lease_expires_at"])
    assert _parse(body["lease_expires_at"]) - _parse(body["updated_at"]) == timedelta(seconds=30)
    assert len(event_rows(app, job["id"])) == events


def test_lease_expiry_writes_an_event(app: Flask, producer: Api, worker: Api) -> None:
    job = producer.enqueue(max_retries=1)
    assert worker.claim() is not None
    later = datetime.now(UTC) + timedelta(days=1)
    with app.app_context(), db.transaction() as conn:
        assert (
            claiming.recover_expired(conn, now=later, settings=queue_settings(), limit=5).value == 1
        )
    last = event_rows(app, job["id"])[-1]
    assert (last["from_status"], last["to_status"], last["kind"]) == (
        "running",
        "pending",
        "lease_expired",
    )
    assert job_row(app, job["id"])["retry_count"] == 1


def test_cancel_and_retry_conflicts(app: Flask, producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue()
    assert_problem(admin.post(f"/jobs/{job['id']}/retry"), 409)
    assert worker.claim() is not None
    before = snapshot(app)
    assert_problem(producer.post(f"/jobs/{job['id']}/cancel"), 409)
    assert snapshot(app) == before
    assert worker.post(f"/jobs/{job['id']}/complete").status_code == 200
    before = snapshot(app)
    assert_problem(admin.post(f"/jobs/{job['id']}/cancel"), 409)
    assert_problem(producer.post(f"/jobs/{job['id']}/cancel"), 409)
    assert_problem(admin.post(f"/jobs/{job['id']}/retry"), 409)
    assert_problem(admin.post("/jobs/777/retry"), 404)
    assert_problem(admin.post("/jobs/777/cancel"), 404)
    assert snapshot(app) == before


def test_a_cancelled_jobs_worker_gets_409_saying_so(producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue()
    assert worker.claim() is not None
    assert admin.post(f"/jobs/{job['id']}/cancel").status_code == 200
    problem = assert_problem(worker.post(f"/jobs/{job['id']}/heartbeat"), 409)
    assert "cancel" in problem["detail"]
    assert_problem(worker.post(f"/jobs/{job['id']}/complete"), 409)


def test_problem_details_shape(producer: Api) -> None:
    problem = assert_problem(producer.post("/jobs", {"type": "nope", "bogus": 1}), 422)
    assert set(problem) == {"type", "title", "status", "detail", "errors"}
    assert set(problem["errors"]) == {"type", "bogus"}
    assert problem["title"] == "Invalid input"
    not_found = assert_problem(producer.get("/jobs/99"), 404)
    assert set(not_found) == {"type", "title", "status", "detail"}
    assert "errors" not in not_found


def test_enqueue_delay_and_run_at_schedule_the_job(app: Flask, producer: Api, worker: Api) -> None:
    later = producer.enqueue(delay_seconds=120)
    assert _parse(later["run_at"]) - _parse(later["created_at"]) == timedelta(seconds=120)
    at = producer.enqueue(run_at="2031-02-03T04:05:06+02:00")
    assert at["run_at"] == "2031-02-03T02:05:06.000000Z"
    assert worker.post("/jobs/claim").status_code == 204
    assert job_count(app) == 2


@pytest.mark.parametrize(
    ("run_at", "shown"),
    [
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000Z"),
        ("0999-06-01T12:00:00+01:00", "0999-06-01T11:00:00.000000Z"),
        ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59.000000Z"),
        ("2030-01-01T00:00:00.123456789Z", "2030-01-01T00:00:00.123456Z"),
    ],
)
def test_timestamps_are_iso_8601_at_any_year(producer: Api, run_at: str, shown: str) -> None:
    job = producer.enqueue(run_at=run_at)
    assert job["run_at"] == shown
    assert ISO_Z.match(job["run_at"])


def test_heartbeat_message_is_sanitized_like_errors(
    app: Flask, producer: Api, worker: Api, client: Any
) -> None:
    job = producer.enqueue()
    worker.claim()
    secret = "connecting to postgresql://app:hunter2@db/prod password=hunter2"
    response = worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 5, "message": secret})
    assert response.status_code == 200
    stored = job_row(app, job["id"])["progress_message"]
    assert "hunter2" not in stored and "[REDACTED]" in stored
