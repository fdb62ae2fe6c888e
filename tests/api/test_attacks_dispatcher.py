"""Attacks on the dispatcher that serves waiting claims: waiters filtered on types they will not
get, more waiters than the admission lets wait, and a waiter whose client has gone."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from prometheus_client import REGISTRY

from app.api.admission import Admission
from tests.api.conftest import LiveServer, job_row
from tests.api.test_flow_longpoll import patch
from tests.api.waiting import asleep, waits
from tests.builders import Api, make_api


@pytest.fixture
def app_config() -> dict[str, Any]:
    """Two waits per token, four per process (half of eight handlers); a short backoff."""
    return {"LONG_POLL_PER_TOKEN": 2, "SERVER_THREADS": 8, "BACKOFF_BASE_SECONDS": 1}


def _finish_claim(app: Flask, token: str | None, **claim: Any) -> Callable[[], Any]:
    """A finish-and-claim that reports nothing, on its own client and thread; the result
    joins it: (status, body, Retry-After, seconds it took)."""
    own = Api(app.test_client(), token)
    answer: list[Any] = []

    def run() -> None:
        started = time.monotonic()
        response = own.post("/jobs/finish", {"results": [], "claim": claim})
        took = time.monotonic() - started
        answer.append((response.status_code, response.get_json(), response.headers, took))

    thread = threading.Thread(target=run)
    thread.start()

    def result() -> Any:
        thread.join(40)
        assert not thread.is_alive()
        status, body, headers, took = answer[0]
        return status, body, headers.get("Retry-After"), took

    return result


def _finishes_answered() -> float:
    """How many finish requests this process has answered with 200 so far."""
    labels = {"route": "/jobs/finish", "status": "200"}
    return REGISTRY.get_sample_value("queuelog_http_requests_total", labels) or 0.0


def _admission(app: Flask) -> Admission:
    return app.extensions["queuelog.admission"]  # type: ignore[no-any-return]


def test_a_waiter_on_a_paused_type_gets_nothing_and_the_job_stays_pending(
    app: Flask, admin: Api, producer: Api, worker: Api
) -> None:
    patch(admin, "email.send", paused=True)
    before = waits()
    waiting = _finish_claim(app, worker.token, max_jobs=1, types=["email.send"], wait_seconds=1.5)
    asleep(before, 1)
    job = producer.enqueue()
    status, body, _, _ = waiting()
    assert status == 200 and body["jobs"] == []
    assert job_row(app, job["id"])["status"] == "pending"


def test_a_waiter_filtered_on_other_types_leaves_the_job_to_the_others(
    app: Flask, producer: Api, worker: Api, other_worker: Api
) -> None:
    before = waits()
    narrow = _finish_claim(app, worker.token, max_jobs=5, types=["report.build"], wait_seconds=2)
    asleep(before, 1)
    wide = _finish_claim(app, other_worker.token, max_jobs=5, wait_seconds=10)
    asleep(before, 2)
    job = producer.enqueue("email.send")
    status, body, _, _ = wide()
    assert status == 200 and [j["id"] for j in body["jobs"]] == [job["id"]]
    status, body, _, _ = narrow()
    assert status == 200 and body["jobs"] == []


def test_waiters_beyond_the_tokens_share_answer_at_once_and_one_job_goes_once(
    app: Flask, producer: Api, worker: Api
) -> None:
    """Six waits of one token: four answer at once (200, no jobs, Retry-After), two wait; the
    one job that comes goes to one of them; every count is released afterwards. The job comes
    once all six have arrived (a call that came after the job had gone would wait instead)."""
    before, answered = waits(), _finishes_answered()
    calls = [_finish_claim(app, worker.token, max_jobs=3, wait_seconds=6) for _ in range(6)]
    asleep(before, 2)
    deadline = time.monotonic() + 10
    while _finishes_answered() - answered < 4:
        assert time.monotonic() < deadline, "the four waits beyond the token's were not answered"
        time.sleep(0.01)
    job = producer.enqueue()
    answers = [call() for call in calls]
    assert {status for status, *_ in answers} == {200}
    refused = [a for a in answers if a[2] == "1"]
    assert len(refused) == 4 and all(a[1]["jobs"] == [] and a[3] < 4 for a in refused)
    handed = [j["id"] for a in answers for j in a[1]["jobs"]]
    assert handed == [job["id"]]
    assert _admission(app).counts() == (0, 0)


def test_the_process_bound_holds_across_tokens(app: Flask, worker: Api) -> None:
    tokens = [worker.token] + [
        make_api(app, app.test_client(), f"w{i}", "worker").token for i in range(3)
    ]
    before = waits()
    calls = [_finish_claim(app, token, max_jobs=1, wait_seconds=2) for token in tokens]
    asleep(before, 4)
    late = _finish_claim(app, worker.token, max_jobs=1, wait_seconds=2)()
    assert late[0] == 200 and late[1]["jobs"] == [] and late[2] == "1" and late[3] < 1.5
    assert all(call()[2] is None for call in calls)
    assert _admission(app).counts() == (0, 0)


def _send_and_hang_up(server: LiveServer, token: str, body: dict[str, Any]) -> None:
    """Send a request and close the connection without reading the answer."""
    data = json.dumps(body).encode()
    head = (
        f"POST /jobs/finish HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(head + data)


def test_a_waiter_whose_client_hung_up_holds_the_job_one_lease_at_most(
    app: Flask, live_server: LiveServer, producer: Api, worker: Api, other_worker: Api
) -> None:
    """A worker waits in a finish-and-claim and hangs up. A server that cannot tell (this
    threaded test server reads nothing from a connection while its request runs; the
    production server can, see ``tests/reliability/test_serving.py``) lets the dispatcher hand
    the next job to that waiter, whose answer goes nowhere. The job is not lost: once the
    lease the gone worker asked for ends, it is recovered and another worker gets it."""
    before = waits()
    claim = {"max_jobs": 1, "wait_seconds": 5, "lease_seconds": 1}
    _send_and_hang_up(live_server, worker.token or "", {"results": [], "claim": claim})
    asleep(before, 1)
    job = producer.enqueue()
    deadline = time.monotonic() + 3
    while job_row(app, job["id"])["status"] == "pending" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job_row(app, job["id"])["worker_id"] == "worker"  # handed to the gone waiter
    got = None
    deadline = time.monotonic() + 10
    while got is None and time.monotonic() < deadline:  # the lease ends, then the backoff
        time.sleep(0.2)
        got = other_worker.claim()
    assert got is not None and got["id"] == job["id"] and got["attempt"] == 2


def test_a_job_due_in_the_far_future_leaves_the_dispatcher_serving(
    app: Flask, producer: Api, worker: Api
) -> None:
    """Found by the fuzzer: a job due in the year 9999 made the dispatcher wait until then, a
    wait longer than the platform's clock can hold (OverflowError), and its thread died: no
    waiting claim was served after it."""
    producer.enqueue(run_at="9999-12-31T23:59:59Z")
    before = waits()
    assert _finish_claim(app, worker.token, max_jobs=1, wait_seconds=1)()[1]["jobs"] == []
    waiting = _finish_claim(app, worker.token, max_jobs=1, wait_seconds=10)
    asleep(before, 2)
    job = producer.enqueue()
    status, body, _, took = waiting()
    assert status == 200 and [j["id"] for j in body["jobs"]] == [job["id"]]
    assert took < 8
