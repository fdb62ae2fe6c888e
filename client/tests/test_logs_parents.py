"""Attempt logs and parents' results from the client against a real gunicorn server: a
handler's ``ctx.log`` lines reach the server in batches while it runs and before its outcome,
and ``ctx.parents`` holds what the steps before it returned."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from conftest import Server, wait_until
from queuelog_client import Client, JobContext, Worker
from queuelog_client.reporter import Reporter
from test_worker import Running

pytestmark = pytest.mark.slow

LOGS_ROUTE = "/jobs/<id:job_id>/logs"


def _texts(admin: Client, job_id: int) -> list[str]:
    (attempt,) = admin.logs(job_id)
    return [line["text"] for line in attempt["lines"]]


def test_log_lines_go_in_batches_while_the_handler_runs_and_before_its_outcome(
    fresh_server: Server,
) -> None:
    halfway = threading.Event()
    go_on = threading.Event()

    def handler(ctx: JobContext) -> dict[str, Any]:
        started = time.monotonic()
        ctx.log("first line\nsecond line")
        halfway.set()
        go_on.wait(20)  # the test reads the log meanwhile: the heartbeat round sent it
        for n in range(250):
            ctx.log(f"row {n}")
        return {"took": time.monotonic() - started}

    with fresh_server.client("producer") as producer, fresh_server.client("worker") as client:
        job = producer.enqueue("email.send")
        running = Running(Worker(client, {"email.send": handler}, concurrency=1))
        try:
            with fresh_server.client("admin") as admin:
                assert halfway.wait(20)
                wait_until(lambda: bool(admin.logs(job.id)), 10, "the lines sent with a beat")
                assert _texts(admin, job.id) == ["first line", "second line"]
                go_on.set()
                wait_until(lambda: producer.get(job.id).status == "completed", 20, "the job")
                texts = _texts(admin, job.id)
        finally:
            go_on.set()
            running.stop()
    assert texts == ["first line", "second line", *(f"row {n}" for n in range(250))]


def test_short_jobs_lines_ride_on_their_outcomes_not_requests_of_their_own(
    fresh_server: Server,
) -> None:
    def handler(ctx: JobContext) -> None:
        for n in range(10):
            ctx.log(f"job {ctx.id} line {n}")

    with fresh_server.client("producer") as producer, fresh_server.client("worker") as client:
        jobs = [producer.enqueue("email.send") for _ in range(20)]
        before = fresh_server.requests()[LOGS_ROUTE]
        running = Running(Worker(client, {"email.send": handler}, concurrency=4))
        try:
            done = {"completed"}
            wait_until(lambda: {producer.get(j.id).status for j in jobs} == done, 30, "the jobs")
        finally:
            running.stop()
        appends = fresh_server.requests()[LOGS_ROUTE] - before
    with fresh_server.client("admin") as admin:
        for job in jobs:
            assert _texts(admin, job.id) == [f"job {job.id} line {n}" for n in range(10)]
    assert appends == 0


def test_ctx_log_never_waits_for_the_server(fresh_server: Server) -> None:
    """A handler logging 5,000 lines sends no request per line: they are buffered, and only
    the newest 2,000 kept when the handler logs faster than they go."""

    def handler(ctx: JobContext) -> None:
        for n in range(5000):
            ctx.log(f"line {n}")

    with fresh_server.client("producer") as producer, fresh_server.client("worker") as client:
        job = producer.enqueue("email.send")
        before = fresh_server.requests()[LOGS_ROUTE]
        running = Running(Worker(client, {"email.send": handler}, concurrency=1))
        try:
            wait_until(lambda: producer.get(job.id).status == "completed", 30, "the job")
        finally:
            running.stop()
    # Buffered, then sent 100 a request (the route's count holds these appends only: nobody
    # read the log yet): tens of requests, not 5,000, whether or not a heartbeat round took
    # some lines while the handler ran.
    appends = fresh_server.requests()[LOGS_ROUTE] - before
    with fresh_server.client("admin") as admin:
        texts = _texts(admin, job.id)
    numbers = [int(text.removeprefix("line ")) for text in texts]
    assert numbers == sorted(numbers) and numbers[-1] == 4999 and len(numbers) >= 2000
    assert appends <= 60


def test_ctx_parents_holds_what_the_steps_before_returned(fresh_server: Server) -> None:
    seen: dict[str, Any] = {}

    def first(ctx: JobContext) -> dict[str, Any]:
        return {"rows": 7}

    def second(ctx: JobContext) -> None:
        seen["parents"] = ctx.parents

    with fresh_server.client("producer") as producer, fresh_server.client("worker") as client:
        parent = producer.enqueue("email.send", {"card": "not for the worker of the child"})
        child = producer.enqueue("report.build", depends_on=[parent.id])
        handlers = {"email.send": first, "report.build": second}
        running = Running(Worker(client, handlers, concurrency=2))
        try:
            wait_until(lambda: producer.get(child.id).status == "completed", 20, "the child")
        finally:
            running.stop()
    assert seen["parents"] == [
        {"id": parent.id, "type": "email.send", "status": "completed", "result": {"rows": 7}}
    ]


def test_an_outcome_refused_for_its_lines_alone_lands_without_them(fresh_server: Server) -> None:
    """The server refuses the request (a line over 2 KiB, which ``ctx.log`` would have cut):
    the outcome goes again without its lines and completes the job."""
    with fresh_server.client("producer") as producer, fresh_server.client("worker") as client:
        job = producer.enqueue("email.send")
        (claimed,) = client.claim(max_jobs=1)
        reporter = Reporter(client)
        held = reporter.hold(claimed)
        bad = {"id": job.id, "attempt": claimed.attempt, "outcome": "completed"}
        reporter.finished(held, bad | {"result": {"ok": 1}, "logs": ["x" * 3000]})
        reporter.start()
        try:
            wait_until(lambda: producer.get(job.id).status != "running", 20, "the outcome")
        finally:
            reporter.close(time.monotonic() + 5)
        assert producer.get(job.id).status == "completed"
        assert producer.get(job.id).result == {"ok": 1}
