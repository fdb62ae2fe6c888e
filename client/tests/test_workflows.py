"""Workflows from the client against a real gunicorn server: waiting for an outcome, children
spawned by handlers, trace context through OpenTelemetry, and the workflow enqueue fields."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import Server, wait_until
from queuelog_client import Client, Worker
from test_worker import Running

pytestmark = pytest.mark.slow


def test_wait_answers_when_the_job_finishes_or_at_the_timeout(
    producer: Client, worker: Client
) -> None:
    pending = producer.enqueue("report.build", delay_seconds=600)
    start = time.monotonic()
    assert producer.wait(pending.id, 1.2).status == "pending"
    assert 1.2 <= time.monotonic() - start < 5
    job = producer.enqueue("email.send", {"n": 1})
    # The module's server is shared: another test's job may be waiting too (let go at once).
    held = {j.id: j for j in worker.claim(max_jobs=100, types=["email.send"])}
    claimed = held.pop(job.id)
    for other in held.values():
        worker.release(other.id, other.attempt)
    outcome = {"id": job.id, "attempt": claimed.attempt, "outcome": "completed", "result": {}}
    finishing = threading.Timer(0.5, lambda: worker.finish([outcome]))
    finishing.start()
    start = time.monotonic()
    finished = producer.wait(job.id, 20)
    assert finished.status == "completed" and time.monotonic() - start < 5
    # The finish call ends before the test does: its client closes with the test, and a call
    # still under way (a retry after the commit, on a busy machine) failed in the next test.
    finishing.join(10)


def test_a_handler_spawns_children_in_its_jobs_trace(fresh_server: Server) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    seen: dict[str, int] = {}

    def parent_handler(ctx):  # type: ignore[no-untyped-def]
        seen["trace_id"] = trace.get_current_span().get_span_context().trace_id
        child = ctx.spawn("report.build", {"from": ctx.id})
        return {"child": child.id}

    with fresh_server.client("producer") as producer, fresh_server.client("worker") as client:
        with trace.get_tracer("test").start_as_current_span("enqueue") as span:
            job = producer.enqueue("email.send")
        trace_id = span.get_span_context().trace_id
        assert (
            job.trace is not None and job.trace["traceparent"].split("-")[1] == f"{trace_id:032x}"
        )
        running = Running(Worker(client, {"email.send": parent_handler}, concurrency=1))
        try:
            wait_until(lambda: producer.get(job.id).status == "completed", 20, "the parent")
        finally:
            running.stop()
        child_id = producer.get(job.id).result["child"]  # type: ignore[index]
        child = producer.get(child_id)
    assert seen["trace_id"] == trace_id  # the handler ran in the enqueue's trace
    assert child.parent_id == job.id and child.payload == {"from": job.id}
    assert (
        child.trace is not None and child.trace["traceparent"].split("-")[1] == f"{trace_id:032x}"
    )


def test_workflow_fields_are_sent_as_given(producer: Client) -> None:
    parent = producer.enqueue("email.send")
    job = producer.enqueue("email.send", depends_on=[parent.id])
    assert (job.depends_on, job.waiting_for) == ([parent.id], [parent.id])
