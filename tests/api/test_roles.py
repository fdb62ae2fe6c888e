"""The role table of docs/architecture.md ("Who may do what") as a route x role matrix, and
object scoping."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.api.conftest import assert_problem, snapshot
from tests.builders import Api

ROLES = ("producer", "worker", "admin", "anonymous")

# route -> expected status for producer, worker, admin, anonymous
MATRIX: dict[str, tuple[int, int, int, int]] = {
    "enqueue": (201, 403, 201, 401),
    "list": (200, 200, 200, 401),
    "get": (200, 404, 200, 401),
    "events": (200, 404, 200, 401),
    "claim": (403, 200, 200, 401),
    "heartbeat": (403, 200, 200, 401),
    "complete": (403, 200, 200, 401),
    "fail": (403, 200, 200, 401),
    "cancel": (200, 403, 200, 401),
    "retry": (403, 403, 200, 401),
    "edit_retry": (403, 403, 200, 401),
    "run_now": (200, 403, 200, 401),
}
WORK = {"heartbeat", "complete", "fail"}

CASES = [
    pytest.param(route, role, statuses[i], id=f"{route}-{role}")
    for route, statuses in MATRIX.items()
    for i, role in enumerate(ROLES)
]


@pytest.fixture
def callers(producer: Api, worker: Api, admin: Api, anonymous: Api) -> dict[str, Api]:
    return {"producer": producer, "worker": worker, "admin": admin, "anonymous": anonymous}


def _prepare(route: str, caller: Api, callers: dict[str, Api]) -> tuple[str, str, Any]:
    """Put a job in the state the route acts on; return (method, path, body)."""
    producer, worker, admin = callers["producer"], callers["worker"], callers["admin"]
    if route == "enqueue":
        return "POST", "/jobs", {"type": "email.send"}
    if route == "list":
        producer.enqueue()
        return "GET", "/jobs", None
    if route in ("retry", "edit_retry"):
        producer.enqueue(max_retries=0)
        held = worker.claim()
        assert held is not None
        assert worker.post(f"/jobs/{held['id']}/fail", {"error": "x"}).status_code == 200
        edit = {"priority": "medium", "payload": {"fixed": True}} if route == "edit_retry" else None
        return "POST", f"/jobs/{held['id']}/retry", edit
    if route == "run_now":
        scheduled = producer.enqueue(delay_seconds=3600)
        return "POST", f"/jobs/{scheduled['id']}/run-now", None
    job = producer.enqueue()
    if route == "claim":
        return "POST", "/jobs/claim", None
    if route in WORK:
        holder = caller if caller.token in (worker.token, admin.token) else worker
        held = holder.claim()
        assert held is not None and held["id"] == job["id"]
        body = {"error": "boom"} if route == "fail" else {}
        return "POST", f"/jobs/{job['id']}/{route}", body
    if route == "cancel":
        return "POST", f"/jobs/{job['id']}/cancel", None
    suffix = "/events" if route == "events" else ""
    return "GET", f"/jobs/{job['id']}{suffix}", None


@pytest.mark.parametrize(("route", "role", "expected"), CASES)
def test_role_route_matrix(
    app: Flask, callers: dict[str, Api], route: str, role: str, expected: int
) -> None:
    caller = callers[role]
    method, path, body = _prepare(route, caller, callers)
    before = snapshot(app)
    response = caller.get(path) if method == "GET" else caller.post(path, body)
    if expected >= 400:
        assert_problem(response, expected)
        assert snapshot(app) == before
        if expected == 401:
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
    else:
        assert response.status_code == expected, response.get_json()
        assert response.is_json


# Object scoping -----------------------------------------------------------------------------


def _problem_without_id(response: Any) -> tuple[int, str, str]:
    body = response.get_json()
    return response.status_code, response.mimetype, body["title"]


def test_producer_sees_only_own_jobs(producer: Api, other_producer: Api, admin: Api) -> None:
    mine = producer.enqueue(payload={"who": "me"})
    theirs = other_producer.enqueue(payload={"who": "them"})
    missing = theirs["id"] + 1000
    assert producer.get(f"/jobs/{mine['id']}").status_code == 200
    for path in (f"/jobs/{theirs['id']}", f"/jobs/{theirs['id']}/events"):
        hidden = producer.get(path)
        absent = producer.get(path.replace(str(theirs["id"]), str(missing)))
        assert_problem(hidden, 404)
        assert _problem_without_id(hidden) == _problem_without_id(absent)
        assert hidden.get_json()["detail"].replace(str(theirs["id"]), "N") == absent.get_json()[
            "detail"
        ].replace(str(missing), "N")
    assert [j["id"] for j in producer.get("/jobs").get_json()["jobs"]] == [mine["id"]]
    assert [j["id"] for j in other_producer.get("/jobs").get_json()["jobs"]] == [theirs["id"]]
    assert {j["id"] for j in admin.get("/jobs").get_json()["jobs"]} == {mine["id"], theirs["id"]}


def test_producer_cannot_cancel_anothers_job(
    app: Flask, producer: Api, other_producer: Api
) -> None:
    theirs = other_producer.enqueue()
    before = snapshot(app)
    assert_problem(producer.post(f"/jobs/{theirs['id']}/cancel"), 404)
    assert snapshot(app) == before
    assert other_producer.post(f"/jobs/{theirs['id']}/cancel").get_json()["status"] == "cancelled"


def test_producer_filters_and_search_stay_within_own_jobs(
    producer: Api, other_producer: Api
) -> None:
    producer.enqueue(idempotency_key="mine")
    theirs = other_producer.enqueue(idempotency_key="theirs")
    assert producer.get("/jobs", query_string={"q": "theirs"}).get_json()["jobs"] == []
    assert producer.get("/jobs", query_string={"q": str(theirs["id"])}).get_json()["jobs"] == []
    assert (
        producer.get("/jobs", query_string={"type": "email.send"}).get_json()["jobs"][0][
            "idempotency_key"
        ]
        == "mine"
    )


def test_worker_sees_jobs_it_holds_or_held(producer: Api, worker: Api, other_worker: Api) -> None:
    waiting = producer.enqueue()
    assert worker.get("/jobs").get_json()["jobs"] == []
    assert_problem(worker.get(f"/jobs/{waiting['id']}"), 404)
    held = worker.claim(lease_seconds=60)
    assert held is not None
    other = producer.enqueue()
    assert other_worker.claim() is not None
    assert [j["id"] for j in worker.get("/jobs").get_json()["jobs"]] == [held["id"]]
    assert [j["id"] for j in other_worker.get("/jobs").get_json()["jobs"]] == [other["id"]]
    assert_problem(other_worker.get(f"/jobs/{held['id']}"), 404)
    assert_problem(other_worker.get(f"/jobs/{held['id']}/events"), 404)
    # Held: after it gave the job back (a retry), it still sees it; so does the next holder.
    failed = worker.post(f"/jobs/{held['id']}/fail", {"error": "x", "retry_in": 0})
    assert failed.get_json()["worker_id"] is None
    assert worker.get(f"/jobs/{held['id']}").status_code == 200
    assert worker.get(f"/jobs/{held['id']}/events").status_code == 200
    reclaimed = other_worker.claim()
    assert reclaimed is not None and reclaimed["id"] == held["id"]
    assert {j["id"] for j in other_worker.get("/jobs").get_json()["jobs"]} == {
        held["id"],
        other["id"],
    }
    assert worker.get(f"/jobs/{held['id']}").get_json()["worker_id"] == "other-worker"


def test_admin_sees_everything(producer: Api, other_producer: Api, worker: Api, admin: Api) -> None:
    ids = {producer.enqueue()["id"], other_producer.enqueue()["id"], admin.enqueue()["id"]}
    assert worker.claim() is not None
    assert {j["id"] for j in admin.get("/jobs").get_json()["jobs"]} == ids
    for job_id in ids:
        assert admin.get(f"/jobs/{job_id}").status_code == 200
        assert admin.get(f"/jobs/{job_id}/events").status_code == 200


def test_admin_acts_on_anyones_job(producer: Api, worker: Api, admin: Api) -> None:
    running = producer.enqueue()
    assert worker.claim() is not None
    pending = producer.enqueue()
    assert admin.post(f"/jobs/{pending['id']}/cancel").get_json()["status"] == "cancelled"
    assert admin.post(f"/jobs/{running['id']}/cancel").get_json()["status"] == "cancelled"
    assert_problem(admin.post(f"/jobs/{running['id']}/cancel"), 409)
    retried = admin.post(f"/jobs/{running['id']}/retry").get_json()
    assert (retried["status"], retried["retry_count"]) == ("pending", 0)
