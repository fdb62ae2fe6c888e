"""Long-polling claims in one process: woken by commits and by the clock, holding nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import event

from app.infra import db
from tests.api.conftest import assert_problem
from tests.builders import Api


@pytest.fixture
def app_config() -> dict[str, Any]:
    """Short backoff: a recovered lease is due again within a second."""
    return {"BACKOFF_BASE_SECONDS": 1}


def _waiting_claim(app: Flask, worker: Api, **fields: Any) -> Callable[[], tuple[Any, float]]:
    """Start a long-polling claim on its own client and thread; the result joins it."""
    own = Api(app.test_client(), worker.token)
    outcome: dict[str, Any] = {}

    def run() -> None:
        start = time.monotonic()
        outcome["job"] = own.claim(**fields)
        outcome["at"] = time.monotonic()
        outcome["took"] = outcome["at"] - start

    thread = threading.Thread(target=run)
    thread.start()

    def result() -> tuple[Any, float]:
        thread.join(40)
        assert not thread.is_alive()
        return outcome["job"], outcome["at"]

    return result


def test_wait_seconds_is_validated(worker: Api) -> None:
    for wait in (-1, 31, "1", None, [1]):
        assert_problem(worker.post("/jobs/claim", {"wait_seconds": wait}), 422)


def test_nothing_due_answers_204_after_the_wait(worker: Api) -> None:
    start = time.monotonic()
    assert worker.claim(wait_seconds=0.4) is None
    assert 0.4 <= time.monotonic() - start < 3


def test_an_enqueue_wakes_a_waiting_claim_which_holds_no_connection(
    app: Flask, producer: Api, worker: Api
) -> None:
    result = _waiting_claim(app, worker, wait_seconds=20)
    time.sleep(0.3)
    assert db.engine(app).pool.checkedout() == 0  # asleep without a connection or transaction
    job = producer.enqueue()
    enqueued = time.monotonic()
    claimed, at = result()
    assert claimed is not None and claimed["id"] == job["id"]
    assert at - enqueued < 1.0


def test_a_scheduled_job_wakes_a_waiting_claim_when_due(producer: Api, worker: Api) -> None:
    start = time.monotonic()
    job = producer.enqueue(delay_seconds=0.5)
    claimed = worker.claim(wait_seconds=10)
    assert claimed is not None and claimed["id"] == job["id"]
    assert 0.45 <= time.monotonic() - start < 3


def test_an_expired_lease_wakes_a_waiting_claim(
    app: Flask, producer: Api, worker: Api, other_worker: Api
) -> None:
    job = producer.enqueue()
    assert worker.claim(lease_seconds=1)["id"] == job["id"]  # type: ignore[index]
    start = time.monotonic()
    claimed = other_worker.claim(wait_seconds=10)
    assert claimed is not None and claimed["id"] == job["id"] and claimed["attempt"] == 2
    assert 0.5 <= time.monotonic() - start < 4


def test_a_retry_made_due_by_an_admin_wakes_a_waiting_claim(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = producer.enqueue(max_retries=0)
    worker.claim()
    assert worker.post(f"/jobs/{job['id']}/fail", {"error": "boom"}).status_code == 200
    result = _waiting_claim(app, worker, wait_seconds=20)
    time.sleep(0.3)
    assert admin.post(f"/jobs/{job['id']}/retry").status_code == 200
    retried = time.monotonic()
    claimed, at = result()
    assert claimed is not None and claimed["id"] == job["id"]
    assert at - retried < 1.0


def _claims_run(app: Flask) -> Callable[[], int]:
    """Count the claim UPDATEs the app's engine runs from now on."""
    counted = [0]

    def count(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        counted[0] += "UPDATE jobs SET status='running'" in sql

    event.listen(db.engine(app), "before_cursor_execute", count)
    return lambda: counted[0]


def test_a_ring_costs_one_or_two_claims_however_many_wait(
    app: Flask, producer: Api, worker: Api
) -> None:
    run = _claims_run(app)
    waiting = [_waiting_claim(app, worker, wait_seconds=20) for _ in range(8)]
    deadline = time.monotonic() + 10
    while run() < 8 and time.monotonic() < deadline:  # each looked once before sleeping
        time.sleep(0.01)
    time.sleep(0.3)  # and is asleep now (a loaded machine needs the count, not a fixed delay)
    before = run()

    def claims() -> int:
        return run() - before

    first = producer.enqueue()
    deadline = time.monotonic() + 10
    while claims() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # the other woken claims are back asleep: none of them claimed
    assert claims() == 2  # the winner, and one that found nothing for the rest
    # Nothing is lost: seven more jobs reach the seven claims still waiting.
    more = producer.post("/jobs/batch", {"jobs": [{"type": "email.send"}] * 7}).get_json()
    claimed = sorted(result()[0]["id"] for result in waiting)
    assert claimed == sorted([first["id"]] + [job["id"] for job in more["jobs"]])
