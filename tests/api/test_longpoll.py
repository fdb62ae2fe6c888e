"""Long-polling claims in one process: woken by commits and by the clock, holding nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import event

from app import create_app
from app.api.dispatcher import TRUST, Dispatcher
from app.api.waiters import Waiter
from app.infra import db
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Effects
from app.queue.vocabulary.states import Role
from app.storage.transactions import encode
from app.storage.wakeup import Wakeup, naming
from tests.api.conftest import assert_problem
from tests.api.waiting import asleep, holding_no_connection, relooks, waits
from tests.builders import Api
from tests.conftest import base_config


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
    before = waits()
    result = _waiting_claim(app, worker, wait_seconds=20)
    asleep(before, 1)
    holding_no_connection(app)  # asleep without a connection or transaction
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


def test_an_expired_lease_wakes_a_claim_waiting_after_one_that_got_fewer_than_it_asked(
    producer: Api, worker: Api, other_worker: Api
) -> None:
    """A look that got fewer jobs than it asked for shows that nothing more is due for its
    filter, but a lease held elsewhere still ends (its worker lost the claim's answer when the
    server died, say): a claim waiting then is handed the job. (The runner's claims ask for
    every free slot, so most get fewer jobs than they ask for.)"""
    lost, kept = producer.enqueue(), producer.enqueue()
    assert worker.claim(lease_seconds=1)["id"] == lost["id"]  # type: ignore[index]
    claim = {"results": [], "claim": {"max_jobs": 5, "wait_seconds": 10}}
    assert [j["id"] for j in other_worker.post("/jobs/finish", claim).get_json()["jobs"]] == [
        kept["id"]
    ]
    start = time.monotonic()
    again = other_worker.post("/jobs/finish", claim).get_json()["jobs"]
    assert [(j["id"], j["attempt"]) for j in again] == [(lost["id"], 2)]
    assert time.monotonic() - start < 5


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


def test_a_ring_costs_one_claim_however_many_wait(app: Flask, producer: Api, worker: Api) -> None:
    """Eight claims wait; a job that becomes due costs one claim statement (the dispatcher's,
    for the oldest waiter), not one per waiter; the waiters that knew nothing was due did not
    look before sleeping."""
    run = _claims_run(app)
    waits_before = waits()
    waiting = [_waiting_claim(app, worker, wait_seconds=20)]

    asleep(waits_before, 1, settle=0.2)
    looked_first, began = run(), time.monotonic()
    waiting += [_waiting_claim(app, worker, wait_seconds=20) for _ in range(7)]
    asleep(waits_before, 8, settle=0.2)
    assert run() - looked_first <= relooks(began)  # the first found nothing: the others knew

    def claims() -> int:
        return run() - looked_first

    first = producer.enqueue()
    deadline = time.monotonic() + 10
    while claims() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # no other waiter looks for the job the first one took
    assert 1 <= claims() <= 1 + relooks(began)
    # Nothing is lost: seven more jobs reach the seven claims still waiting, one claim each.
    more = producer.post("/jobs/batch", {"jobs": [{"type": "email.send"}] * 7}).get_json()
    claimed = sorted(result()[0]["id"] for result in waiting)
    assert claimed == sorted([first["id"]] + [job["id"] for job in more["jobs"]])
    assert 8 <= claims() <= 8 + relooks(began)


def _silent_producer(app: Flask, database_url: str, producer: Api) -> Api:
    """A producer on a second app server of the same database that tells no one of its
    commits (its wake-ups go nowhere): the jobs it makes due are heard of only as a test says."""
    silent = create_app(base_config(database_url))
    db.announcer(silent).wake = Wakeup()
    app.extensions.setdefault("test.silent", []).append(silent)
    return Api(silent.test_client(), producer.token)


def _heard(app: Flask, named: str) -> None:
    """This app's listener hears that a job of type email.send became due, naming ``named``
    (this app's own listener, or another) to claim it."""
    sender = Wakeup()  # another process's name
    body = encode(Effects(due=("email.send",)))
    db.announcer(app).wake.hear(naming(sender.addressed(body, to_one=True), named))


@pytest.mark.parametrize("named", ["this one", "another", "no one"])
def test_a_waiting_claim_trusts_that_nothing_is_due_for_a_while_only(
    app: Flask, database_url: str, producer: Api, worker: Api, named: str
) -> None:
    """A job made due by another process reaches a claim waiting here at once when this
    process is named to claim it; when another is named, or no one heard of it (the process
    that kept it for its own waiters was killed before claiming it), once this one no longer
    trusts what it knew: ``TRUST`` after its last look (before the enqueue, which a busy machine
    may stretch)."""
    silent = _silent_producer(app, database_url, producer)
    before = waits()
    result = _waiting_claim(app, worker, wait_seconds=20)  # its look found nothing: it knows
    asleep(before, 1)
    try:
        job = silent.enqueue()
        heard = time.monotonic()
        wake = db.announcer(app).wake
        if named != "no one":
            _heard(app, wake.listener if named == "this one" else "someone-else")
        claimed, at = result()
    finally:
        db.close(app.extensions["test.silent"].pop())
    assert claimed is not None and claimed["id"] == job["id"]
    if named == "this one":  # (or, where the way names no one, everyone)
        assert at - heard < 1.0
    else:  # it looks again once it no longer trusts what it knew: ``TRUST`` after its look
        assert 1.0 < at - heard < 2 * TRUST.total_seconds() + 1


def test_jobs_announced_to_waiters_and_not_claimed_yet_take_their_room(app: Flask) -> None:
    """A claim waiting for one job has room for one: once a job is announced to it (its claim
    not made yet), a second job committed here is for the other processes to hear of, not
    kept for a waiter that will take only the first."""
    dispatcher = Dispatcher(app)  # its thread not started: nothing claims the announced job
    actor = Actor(id=1, name="w1", role=Role.WORKER)
    waiter = Waiter(actor, "hash", None, 1, None, time.monotonic() + 5)
    waiting = threading.Thread(target=dispatcher.wait, args=(waiter,))
    waiting.start()
    try:
        deadline = time.monotonic() + 5
        while dispatcher.capacity(["email.send"]) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        dispatcher.serve(Effects(due=("email.send",)))
        assert dispatcher.capacity(["email.send"]) == 0
        assert dispatcher.capacity(["report.build"]) == 0  # it takes any type: its room is taken
    finally:
        waiter.settled.set()
        waiting.join(10)
