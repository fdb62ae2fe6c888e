"""Set-based batch operations: a request that enqueues, claims, heartbeats or finishes N jobs
sends the same number of statements whatever N is (each statement of an ``executemany`` counts
once per parameter set, as the driver sends it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import event

from app.infra import db
from tests.backends import every_backend  # noqa: F401
from tests.builders import Api

SIZES = (1, 10, 50, 100)  # a claim takes at most 100 jobs; the bench's batches are 50


@pytest.fixture
def app_config() -> dict[str, Any]:
    """The claim path's schedule tick and its note of the types polled (every tenth of the idle
    window) run once, in the warm-up, not in a measured claim."""
    return {"SCHEDULE_TICK_SECONDS": 3600, "EXPLAIN_IDLE_WORKER_SECONDS": 36_000}


def _one_statement(ctx: Any) -> bool:
    """SQLAlchemy sends an executemany INSERT as multi-row statements ("insertmanyvalues")."""
    return ctx is not None and ctx.execute_style.name == "INSERTMANYVALUES"


@contextmanager
def counted(app: Flask) -> Iterator[list[str]]:
    """The statements the app's engine sends meanwhile (an executemany once per row)."""
    sent: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, params: Any, ctx: Any, many: bool) -> None:
        sent.extend([statement] * (len(params) if many and not _one_statement(ctx) else 1))

    engine = db.engine(app)
    event.listen(engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", note)


def _statements(app: Flask, call: Callable[[], Any]) -> int:
    with counted(app) as sent:
        call()
    return len(sent)


def _steps(
    app: Flask, producer: Api, worker: Api, n: int, logs: list[str] | None = None
) -> dict[str, int]:
    """Statements of each batch step for ``n`` jobs: enqueue, claim, heartbeat, finish (half
    completed, half failed with a retry left); with ``logs``, every heartbeat and outcome
    carries those lines."""
    carried = {} if logs is None else {"logs": logs}
    items = [{"type": "email.send", "payload": {"i": i}} for i in range(n)]
    steps: dict[str, int] = {}
    answers: dict[str, Any] = {}

    def enqueue() -> None:
        answers["enqueue"] = producer.post("/jobs/batch", {"jobs": items})

    def claim() -> None:
        answers["claim"] = worker.post("/jobs/claim", {"max_jobs": n})

    steps["enqueue"] = _statements(app, enqueue)
    assert answers["enqueue"].status_code == 201
    steps["claim"] = _statements(app, claim)
    claimed = answers["claim"].get_json()["jobs"]
    assert len(claimed) == n
    beats = [
        {"id": job["id"], "attempt": job["attempt"], "progress": 50} | carried for job in claimed
    ]
    steps["heartbeat"] = _statements(app, lambda: worker.post("/jobs/heartbeat", {"jobs": beats}))
    results = [
        {"id": job["id"], "attempt": job["attempt"], "outcome": "completed", "result": {"ok": 1}}
        | carried
        if i % 2 == 0
        else {"id": job["id"], "attempt": job["attempt"], "outcome": "failed", "error": "boom"}
        | carried
        for i, job in enumerate(claimed)
    ]
    finished: dict[str, Any] = {}
    steps["finish"] = _statements(
        app, lambda: finished.update(r=worker.post("/jobs/finish", {"results": results}))
    )
    assert [item["status"] for item in finished["r"].get_json()["results"]] == [200] * n
    return steps


def test_statements_per_batch_step_do_not_grow_with_its_size(
    app: Flask, producer: Api, worker: Api, backend: str
) -> None:
    _steps(app, producer, worker, 2)  # first calls: caches filled, tokens first seen
    counts = {n: _steps(app, producer, worker, n) for n in SIZES}
    # One job takes one edge of a finish where many take two (completed, retried): no more.
    assert all(counts[1][step] <= counts[10][step] for step in counts[1]), counts
    assert counts[10] == counts[50] == counts[100], counts


def test_carried_log_lines_cost_two_statements_per_request_whatever_its_size(
    app: Flask, producer: Api, worker: Api, backend: str
) -> None:
    """Lines on heartbeat and finish items: one read of the attempts' sizes and one insert for
    the whole request; a request without lines runs what it ran before."""
    lines = [f"line {i}" for i in range(10)]
    _steps(app, producer, worker, 2), _steps(app, producer, worker, 2, lines)  # caches filled
    for n in (1, 10, 50):
        plain, carrying = _steps(app, producer, worker, n), _steps(app, producer, worker, n, lines)
        assert carrying["heartbeat"] == plain["heartbeat"] + 2, (n, plain, carrying)
        assert carrying["finish"] == plain["finish"] + 2, (n, plain, carrying)


def _items_each_on_their_own(n: int) -> list[dict[str, Any]]:
    """``n`` items of a batch with ``"atomic": false``: every fifth malformed, every fifth
    waiting for the item before it, each with an idempotency key (as a coalescing client
    sends them)."""
    items: list[dict[str, Any]] = []
    for i in range(n):
        item: dict[str, Any] = {"type": "email.send", "idempotency_key": f"{n}-{i}"}
        if i % 5 == 1:
            item["after_items"] = [i - 1]
        items.append({"type": "no.such.type"} if i % 5 == 4 else item)
    return items


def test_a_batch_of_items_each_on_its_own_is_stored_together(
    app: Flask, producer: Api, backend: str
) -> None:
    """Refused items do not turn the batch into one savepoint or one insert per item."""

    def each(n: int) -> int:
        body = {"jobs": _items_each_on_their_own(n), "atomic": False}
        answers: dict[str, Any] = {}
        count = _statements(app, lambda: answers.update(r=producer.post("/jobs/batch", body)))
        statuses = [item["status"] for item in answers["r"].get_json()["results"]]
        assert statuses == [422 if i % 5 == 4 else 201 for i in range(n)]
        return count

    each(5)  # first calls: caches filled, the token first seen
    counts = {n: each(n) for n in (10, 50, 100)}
    assert counts[10] == counts[50] == counts[100], counts


def test_parents_results_cost_one_statement_for_the_whole_claimed_batch(
    app: Flask, producer: Api, worker: Api, backend: str
) -> None:
    """A claim of jobs with ``depends_on`` reads their parents with one more statement than
    the same claim of jobs without, whatever the number of jobs; plain jobs read nothing."""
    parent = producer.enqueue("email.send")
    worker.post("/jobs/claim", {"max_jobs": 1})
    done = {"id": parent["id"], "attempt": 1, "outcome": "completed", "result": {"n": 1}}
    assert worker.post("/jobs/finish", {"results": [done]}).status_code == 200

    def claim(n: int, **fields: Any) -> int:
        items = [{"type": "email.send", **fields} for _ in range(n)]
        assert producer.post("/jobs/batch", {"jobs": items}).status_code == 201
        answers: dict[str, Any] = {}
        count = _statements(
            app, lambda: answers.update(r=worker.post("/jobs/claim", {"max_jobs": n}))
        )
        jobs = answers["r"].get_json()["jobs"]
        assert len(jobs) == n and all(("parents" in job) == bool(fields) for job in jobs)
        return count

    claim(2), claim(2, depends_on=[parent["id"]])  # first calls: caches filled
    for n in (1, 10, 50):
        assert claim(n, depends_on=[parent["id"]]) == claim(n) + 1, n


def test_a_log_request_costs_the_same_statements_whatever_its_lines(
    app: Flask, producer: Api, worker: Api, backend: str
) -> None:
    producer.enqueue()
    held = worker.post("/jobs/claim", {}).get_json()

    def append(n: int) -> int:
        body = {"attempt": held["attempt"], "lines": [f"line {i}" for i in range(n)]}
        return _statements(app, lambda: worker.post(f"/jobs/{held['id']}/logs", body))

    append(2)  # first call: caches filled
    assert append(1) == append(10) == append(100)
