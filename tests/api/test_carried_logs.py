"""Attempt-log lines carried on the items of ``POST /jobs/finish`` and ``POST /jobs/heartbeat``:
stored per attempt with the item, sanitized and capped as ``POST /jobs/{id}/logs`` stores them,
and only when the item lands (on both engines)."""

from __future__ import annotations

from typing import Any

from flask import Flask

from app.queue.usecases.attempt_logs import dropped_marker
from tests.api.conftest import assert_problem
from tests.api.test_attempt_logs import TOKEN, batch, held_job, log, log_rows, texts
from tests.builders import Api


def _beat(worker: Api, job: dict[str, Any], lines: list[str], attempt: int | None = None) -> Any:
    item = {"id": job["id"], "attempt": attempt or job["attempt"], "logs": lines}
    return worker.post("/jobs/heartbeat", {"jobs": [item]})


def _finish(worker: Api, items: list[dict[str, Any]]) -> list[int]:
    answer = worker.post("/jobs/finish", {"results": items})
    assert answer.status_code == 200, answer.get_json()
    return [item["status"] for item in answer.get_json()["results"]]


def test_lines_ride_on_heartbeats_and_outcomes_per_attempt(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = producer.enqueue(max_retries=1)
    first = worker.claim()
    assert first is not None
    assert _beat(worker, first, ["starting", "step 1"]).get_json()["results"][0]["status"] == 200
    failed = {"id": job["id"], "attempt": 1, "outcome": "failed", "error": "x", "retry_in": 0}
    assert _finish(worker, [failed | {"logs": ["gave up"]}]) == [200]
    second = worker.claim()
    assert second is not None and second["attempt"] == 2
    done = {"id": job["id"], "attempt": 2, "outcome": "completed", "logs": ["again", ""]}
    assert _finish(worker, [done]) == [200]
    assert texts(admin, job["id"]) == {1: ["starting", "step 1", "gave up"], 2: ["again", ""]}


def test_a_request_stores_each_items_lines_and_skips_items_without(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    jobs = [producer.enqueue() for _ in range(3)]
    held = worker.post("/jobs/claim", {"max_jobs": 3}).get_json()["jobs"]
    items = [{"id": job["id"], "attempt": job["attempt"], "outcome": "completed"} for job in held]
    items[0]["logs"] = ["zero"]
    items[2]["logs"] = ["two a", "two b"]
    assert _finish(worker, items) == [200, 200, 200]
    by_id = {job["id"]: texts(admin, job["id"]) for job in jobs}
    assert sorted(by_id.values(), key=len) == [{}, {1: ["zero"]}, {1: ["two a", "two b"]}]
    assert log_rows(app) == 2  # a row per item that carried lines


def test_carried_lines_are_sanitized(app: Flask, producer: Api, worker: Api, admin: Api) -> None:
    held = held_job(producer, worker)
    line = f"\x1b[31mpushing\x1b[0m with {TOKEN} PGPASSWORD=hunter22 \u202eevil"
    assert _beat(worker, held, [line]).status_code == 200
    item = {"id": held["id"], "attempt": 1, "outcome": "completed", "logs": [f"done {TOKEN}"]}
    assert _finish(worker, [item]) == [200]
    assert texts(admin, held["id"]) == {
        1: ["pushing with [REDACTED] PGPASSWORD=[REDACTED] evil", "done [REDACTED]"]
    }


def test_carried_lines_share_the_attempts_cap(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    held = held_job(producer, worker)
    assert log(worker, held, batch("a")).status_code == 200
    assert _beat(worker, held, batch("b")).get_json()["results"][0]["status"] == 200
    item = {"id": held["id"], "attempt": 1, "outcome": "completed", "logs": batch("c")}
    assert _finish(worker, [item]) == [200]
    lines = texts(admin, held["id"])[1]
    assert lines[0] == dropped_marker(172)
    assert lines[1].startswith("b072") and len(lines) == 1 + 28 + 100


def test_limits_are_the_log_routes_and_refuse_the_request(
    app: Flask, producer: Api, worker: Api
) -> None:
    held = held_job(producer, worker)
    body = assert_problem(_beat(worker, held, ["x"] * 101), 422)
    assert body["errors"] == {"jobs[0].logs": "must be a list of at most 100 strings"}
    item = {"id": held["id"], "attempt": 1, "outcome": "completed", "logs": ["ok", "x" * 2049]}
    body = assert_problem(worker.post("/jobs/finish", {"results": [item]}), 422)
    assert list(body["errors"]) == ["results[0].logs[1]"]
    assert log_rows(app) == 0
    assert _beat(worker, held, []).get_json()["results"][0]["status"] == 200  # none: no row
    assert log_rows(app) == 0


def test_a_refused_item_stores_no_lines_and_the_others_do(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    stale_job = producer.enqueue()
    other_job = producer.enqueue()
    held = {
        job["id"]: job for job in worker.post("/jobs/claim", {"max_jobs": 2}).get_json()["jobs"]
    }
    stale = _beat(worker, held[stale_job["id"]], ["stale beat"], attempt=2)
    assert stale.get_json()["results"][0]["status"] == 409
    items = [
        {"id": stale_job["id"], "attempt": 2, "outcome": "completed", "logs": ["stale"]},
        {"id": other_job["id"], "attempt": 1, "outcome": "completed", "logs": ["kept"]},
        {"id": other_job["id"], "attempt": 1, "outcome": "completed", "logs": ["repeat"]},
        {"id": 999_999, "attempt": 1, "outcome": "completed", "logs": ["missing"]},
    ]
    assert _finish(worker, items) == [409, 200, 409, 404]
    assert texts(admin, stale_job["id"]) == {}
    assert texts(admin, other_job["id"]) == {1: ["kept"]}
    assert log_rows(app) == 1
