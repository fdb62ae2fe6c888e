"""Attacks on ``POST /jobs/finish`` with a ``claim``: who may claim, a claim part that refuses the
whole request before any outcome, fencing, hostile bodies, and a caller whose token, account or
role changes while it waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.accounts import service as accounts
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow
from devservers.accounts import AS_OPERATOR
from tests.api.conftest import assert_problem, job_row, snapshot
from tests.api.waiting import asleep, waits
from tests.builders import Api, make_api


@pytest.fixture
def app_config() -> dict[str, Any]:
    """A low lease ceiling, one wait per token, a short backoff (a recovered lease is due
    again within a second)."""
    return {"MAX_LEASE_SECONDS": 600, "LONG_POLL_PER_TOKEN": 1, "BACKOFF_BASE_SECONDS": 1}


def _done(job: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"id": job["id"], "attempt": job["attempt"], "outcome": "completed", **fields}


def _finish(caller: Api, results: list[dict[str, Any]], **claim: Any) -> Any:
    return caller.post("/jobs/finish", {"results": results, "claim": claim})


def _held(producer: Api, worker: Api) -> dict[str, Any]:
    """A job of ``producer`` that ``worker`` holds, and another one due behind it."""
    producer.enqueue()
    producer.enqueue()
    held = worker.claim()
    assert held is not None
    return held


def _in_background(call: Callable[[], Any]) -> Callable[[], Any]:
    """Start ``call`` on a thread once the dispatcher counts one more waiter; the result joins
    it (the call's answer)."""
    answer: list[Any] = []
    before = waits()
    thread = threading.Thread(target=lambda: answer.append(call()))
    thread.start()
    asleep(before, 1)

    def result() -> Any:
        thread.join(20)
        assert not thread.is_alive()
        return answer[0]

    return result


@pytest.mark.parametrize("role", ["producer", "monitor"])
def test_a_non_worker_claiming_is_403_and_nothing_is_applied(
    app: Flask, client: FlaskClient, producer: Api, worker: Api, role: str
) -> None:
    held = _held(producer, worker)
    caller = producer if role == "producer" else make_api(app, client, "watch", "monitor")
    before = snapshot(app)
    assert_problem(_finish(caller, [_done(held)], max_jobs=5), 403)
    assert_problem(_finish(caller, [], max_jobs=5, wait_seconds=5), 403)
    assert snapshot(app) == before


def test_another_workers_outcomes_are_409_and_the_claim_still_works(
    app: Flask, producer: Api, worker: Api, other_worker: Api
) -> None:
    held = _held(producer, worker)
    answer = _finish(other_worker, [_done(held)], max_jobs=5).get_json()
    assert [r["status"] for r in answer["results"]] == [409]
    assert "job" not in answer["results"][0]  # nothing of the other worker's job leaks
    assert [j["worker_id"] for j in answer["jobs"]] == ["other-worker"]
    assert job_row(app, held["id"])["status"] == "running"  # still the first worker's


REFUSED_CLAIMS = {
    "unknown type": ({"max_jobs": 1, "types": ["no.such.type"]}, "claim.types[0]"),
    "empty types": ({"max_jobs": 1, "types": []}, "claim.types"),
    "type with NUL": ({"max_jobs": 1, "types": ["email.send\u0000"]}, "claim.types[0]"),
    "type a number": ({"max_jobs": 1, "types": [1]}, "claim.types[0]"),
    "max_jobs 0": ({"max_jobs": 0}, "claim.max_jobs"),
    "max_jobs 101": ({"max_jobs": 101}, "claim.max_jobs"),
    "max_jobs true": ({"max_jobs": True}, "claim.max_jobs"),
    "max_jobs huge": ({"max_jobs": 10**40}, "claim.max_jobs"),
    "wait_seconds 31": ({"max_jobs": 1, "wait_seconds": 31}, "claim.wait_seconds"),
    "wait_seconds -1": ({"max_jobs": 1, "wait_seconds": -1}, "claim.wait_seconds"),
    "lease above the ceiling": ({"max_jobs": 1, "lease_seconds": 601}, "claim.lease_seconds"),
    "lease 0": ({"max_jobs": 1, "lease_seconds": 0}, "claim.lease_seconds"),
    "lease a float": ({"max_jobs": 1, "lease_seconds": 1.5}, "claim.lease_seconds"),
    "worker_id": ({"max_jobs": 1, "worker_id": "someone"}, "claim.worker_id"),
    "claim a list": ([{"max_jobs": 1}], "claim"),
}


@pytest.mark.parametrize(("claim", "field"), REFUSED_CLAIMS.values(), ids=REFUSED_CLAIMS)
def test_a_refused_claim_part_applies_no_outcome(
    app: Flask, producer: Api, worker: Api, claim: Any, field: str
) -> None:
    held = _held(producer, worker)
    before = snapshot(app)
    response = worker.post("/jobs/finish", {"results": [_done(held)], "claim": claim})
    assert field in assert_problem(response, 422)["errors"]
    assert snapshot(app) == before


def test_a_results_list_that_is_empty_needs_a_claim(app: Flask, worker: Api) -> None:
    for body in ({"results": []}, {"results": [], "claim": None}):
        assert "results" in assert_problem(worker.post("/jobs/finish", body), 422)["errors"]


def test_one_job_twice_in_one_request_is_finished_once(
    app: Flask, producer: Api, worker: Api
) -> None:
    held = _held(producer, worker)
    failed = _done(held, outcome="failed", error="boom", retryable=False)
    answer = _finish(worker, [_done(held), failed], max_jobs=1).get_json()
    assert [r["status"] for r in answer["results"]] == [200, 409]
    assert job_row(app, held["id"])["status"] == "completed"
    assert len(answer["jobs"]) == 1 and answer["jobs"][0]["id"] != held["id"]


def test_a_stale_attempts_outcome_is_409_while_the_claim_works(
    app: Flask, producer: Api, worker: Api, other_worker: Api
) -> None:
    """The first worker's lease expired and another worker claimed the job: the first
    worker's late outcome is refused, and its claim part hands it the next job."""
    job = producer.enqueue()
    stale = worker.claim(lease_seconds=1)
    assert stale is not None
    current = None
    deadline = time.monotonic() + 10
    while current is None and time.monotonic() < deadline:  # the lease expires, then backoff
        time.sleep(0.2)
        current = other_worker.claim()
    assert current is not None and current["id"] == job["id"] and current["attempt"] == 2
    after = producer.enqueue()
    answer = _finish(worker, [_done(stale)], max_jobs=2).get_json()
    assert [r["status"] for r in answer["results"]] == [409]
    assert [j["id"] for j in answer["jobs"]] == [after["id"]]
    assert job_row(app, job["id"])["status"] == "running"  # the other worker's attempt stands


HOSTILE = {
    "results over MAX_BATCH": (
        lambda: {"results": [{"id": 1, "attempt": 1, "outcome": "completed"}] * 1001},
        422,
    ),
    "result nested too deep": (
        lambda: {
            "results": [{"id": 1, "attempt": 1, "outcome": "completed", "result": _deep(40)}],
            "claim": {"max_jobs": 1},
        },
        400,
    ),
    "claim nested too deep": (lambda: {"results": [], "claim": _deep(40)}, 400),
    "body over MAX_CONTENT_LENGTH": (
        lambda: {"results": [], "claim": {"max_jobs": 1}, "pad": "x" * 1_100_000},
        413,
    ),
    "result key a lone surrogate": (
        lambda: {
            "results": [{"id": 1, "attempt": 1, "outcome": "completed", "result": {"\ud800": 1}}],
            "claim": {"max_jobs": 1},
        },
        422,
    ),
    "id beyond the database's integers": (
        lambda: {"results": [{"id": 2**63, "attempt": 1, "outcome": "completed"}]},
        422,
    ),
}


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(levels):
        node = {"a": node}
    return node


@pytest.mark.parametrize(("make", "status"), HOSTILE.values(), ids=HOSTILE)
def test_a_hostile_body_is_a_clear_4xx_that_changes_nothing(
    app: Flask, producer: Api, worker: Api, make: Callable[[], Any], status: int
) -> None:
    _held(producer, worker)
    before = snapshot(app)
    assert_problem(worker.post("/jobs/finish", make()), status)
    assert snapshot(app) == before


@pytest.mark.parametrize(
    ("error", "stored"),
    [("a\u0000b", "a\ufffdb"), ("a\udcffb", "a\ufffdb"), ("\ufeffboom\u202e", "boom")],
    ids=["NUL", "lone surrogate", "invisible and bidi"],
)
def test_an_error_with_hostile_characters_is_stored_without_them(
    app: Flask, producer: Api, worker: Api, admin: Api, error: str, stored: str
) -> None:
    """A worker's error text is what an exception said (a file name that is not UTF-8 gives
    lone surrogates): it is sanitized like any error, not a reason to refuse the request
    with the other outcomes and the claim in it."""
    held = _held(producer, worker)
    other = worker.post("/jobs/finish", {"results": [], "claim": {"max_jobs": 1}})
    (second,) = other.get_json()["jobs"]
    failed = _done(held, outcome="failed", error=error, retryable=False)
    response = _finish(worker, [failed, _done(second)], max_jobs=1)
    assert response.status_code == 200, response.get_data()[:300]
    assert [r["status"] for r in response.get_json()["results"]] == [200, 200]
    job = admin.get(f"/jobs/{held['id']}").get_json()
    assert job["status"] == "failed" and job["error"] == stored


def test_a_thousand_unknown_jobs_are_404_each_and_the_claim_still_works(
    producer: Api, worker: Api
) -> None:
    job = producer.enqueue()
    unknown = [{"id": 10**9 + i, "attempt": 1, "outcome": "completed"} for i in range(1000)]
    answer = _finish(worker, unknown, max_jobs=1).get_json()
    assert {r["status"] for r in answer["results"]} == {404}
    assert [j["id"] for j in answer["jobs"]] == [job["id"]]


def test_beyond_the_admission_the_outcomes_apply_and_the_jobs_are_empty(
    app: Flask, producer: Api, worker: Api
) -> None:
    """The token's one wait is taken: a finish that would wait still applies its outcomes
    and answers at once, 200 with no jobs and Retry-After, never a 500 or a queue."""
    held = _held(producer, worker)
    worker.post("/jobs/finish", {"results": [], "claim": {"max_jobs": 1}})  # the second job
    waiting = _in_background(
        lambda: Api(app.test_client(), worker.token).claim(wait_seconds=3, types=["report.build"])
    )
    started = time.monotonic()
    response = _finish(worker, [_done(held)], max_jobs=1, wait_seconds=10)
    assert time.monotonic() - started < 2
    assert response.status_code == 200 and response.headers["Retry-After"] == "1"
    answer = response.get_json()
    assert answer["jobs"] == [] and [r["status"] for r in answer["results"]] == [200]
    assert job_row(app, held["id"])["status"] == "completed"
    assert waiting() is None


def _revoke(app: Flask, name: str) -> None:
    with app.app_context(), db.transaction() as conn:
        for token, _ in accounts.list_tokens(conn, accounts.OPERATOR, name):
            accounts.revoke_token(
                conn, accounts.OPERATOR, token.id, now=utcnow(), origin=AS_OPERATOR
            )


def _disable(app: Flask, name: str) -> None:
    with app.app_context(), db.transaction() as conn:
        accounts.set_disabled(
            conn, accounts.OPERATOR, name, disabled=True, now=utcnow(), origin=AS_OPERATOR
        )


def _demote(app: Flask, name: str) -> None:
    with app.app_context(), db.transaction() as conn:
        accounts.update_user(
            conn,
            accounts.OPERATOR,
            name,
            role="producer",
            max_priority="low",
            now=utcnow(),
            origin=AS_OPERATOR,
        )


@pytest.mark.parametrize(
    ("change", "status"),
    [(_revoke, 401), (_disable, 401), (_demote, 403)],
    ids=["token revoked", "user disabled", "demoted to producer"],
)
@pytest.mark.parametrize("route", ["finish", "claim"])
def test_a_waiter_whose_credential_changed_gets_no_job(
    app: Flask,
    producer: Api,
    worker: Api,
    change: Callable[[Flask, str], None],
    status: int,
    route: str,
) -> None:
    """While the claim waits, the worker's token is revoked, its user disabled or demoted:
    the job that wakes the dispatcher is not handed over and stays pending, and the request
    answers as a new request with that credential would (401 or 403), never a 500."""
    held = _held(producer, worker)
    worker.post("/jobs/finish", {"results": [], "claim": {"max_jobs": 1}})  # nothing left due
    own = Api(app.test_client(), worker.token)
    if route == "finish":
        waiting = _in_background(lambda: _finish(own, [_done(held)], max_jobs=1, wait_seconds=10))
    else:
        waiting = _in_background(lambda: own.post("/jobs/claim", {"wait_seconds": 10}))
    change(app, "worker")
    job = producer.enqueue()  # wakes the dispatcher, which re-checks the waiter's token
    response = waiting()
    assert_problem(response, status)
    if status == 401:
        assert response.headers["WWW-Authenticate"] == "Bearer"
    assert job_row(app, job["id"])["status"] == "pending"
    if route == "finish":  # applied and committed before the wait began
        assert job_row(app, held["id"])["status"] == "completed"
    assert app.extensions["queuelog.admission"].counts() == (0, 0)  # its wait was let go
