"""The state graph: the README's diagram is the ``EDGES`` table, and each named transition moves
exactly the states its edge names, writing exactly one event of its kind (on both engines)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.infra import db
from app.queue.rules import edges
from app.queue.rules.settings import QueueSettings
from app.queue.sql import jobs as jobs_sql
from app.queue.vocabulary import states
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import EDGES, EventKind, JobStatus
from app.storage.schema import job_events, jobs
from devservers.servers import REPO
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_job, make_user

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LATER = T0 + timedelta(seconds=10)  # after the fabricated lease ended
ARROW = re.compile(r"^(\w+)\s+--(.+?)-->\s+(\w+)")


def readme_arrows() -> set[tuple[str, str, str]]:
    """``(from, label, to)`` for every arrow of the README's lifecycle diagram."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## Job lifecycle", 1)[1].split("```", 2)[1]
    arrows = {m.groups() for line in block.splitlines() if (m := ARROW.match(line))}
    assert len(arrows) == len([line for line in block.splitlines() if "-->" in line]), block
    return {(a, label.strip(), b) for a, label, b in arrows}


def test_readme_diagram_is_the_edge_table() -> None:
    table = {(str(s), e.label, str(e.target)) for e in EDGES.values() for s in e.sources}
    assert readme_arrows() == table


def test_every_event_kind_but_enqueued_and_edited_belongs_to_an_edge() -> None:
    # ``edited`` comes with an admin's retry, after its ``retried`` event.
    assert {e.kind for e in EDGES.values()} == set(EventKind) - {
        EventKind.ENQUEUED,
        EventKind.EDITED,
    }


def test_the_database_refuses_an_unknown_event_kind(app: Flask, backend: str) -> None:
    job = _job_in(app, JobStatus.PENDING)
    row = {"job_id": job.id, "at": T0, "to_status": "pending", "kind": "teleported"}
    with pytest.raises(IntegrityError), db.transaction(app) as conn:
        conn.execute(insert(job_events).values(**row))
    for kind in EventKind:
        with db.transaction(app) as conn:
            conn.execute(insert(job_events).values(**(row | {"kind": kind})))


def _job_in(app: Flask, status: JobStatus) -> Job:
    """A due job put straight into ``status``, held (or last held) by worker ``w`` at attempt 1
    with a lease that ended at T0: every edge's other expectations hold, only the status varies."""
    settings = QueueSettings.from_config(app.config)
    producer = make_user(app, f"p-{status}", "producer").actor()
    with db.transaction(app) as conn:
        job = make_job(conn, producer, settings, now=T0 - timedelta(seconds=5), max_retries=3)
        conn.execute(
            update(jobs)
            .where(jobs.c.id == job.id)
            .values(status=status, worker_id="w", attempts=1, lease_expires_at=T0)
        )
        found = jobs_sql.get_job(conn, job.id)
    assert found is not None
    return found


def _report(
    conn: Connection, job: Job, edge: states.Edge, *, worker: str | None = "w", **values: Any
) -> Job | None:
    """Report attempt 1 of ``job`` taking ``edge``, from ``worker`` (None: the server's
    time-out, whoever holds it)."""
    report = edges.Report(edge, job.id, 1, retry_count=job.retry_count, **values)
    return edges.finish_many(conn, [report], worker=worker, now=LATER).value.get(job.id)


Edge = Callable[[Connection, Job], Job | None]
MOVES: dict[str, Edge] = {
    "claim": lambda c, j: next(iter(edges.claim(c, worker="w", now=LATER, lease_seconds=30)), None),
    "complete": lambda c, j: _report(c, j, states.Edge.COMPLETE, result={"ok": True}),
    "fail_with_retry": lambda c, j: _report(
        c, j, states.Edge.FAIL_WITH_RETRY, run_at=LATER, error="boom"
    ),
    "fail_for_good": lambda c, j: _report(c, j, states.Edge.FAIL_FOR_GOOD, error="boom"),
    "lease_expired_with_retry": lambda c, j: (
        edges.lease_expired(c, j, now=LATER, run_at=LATER, error="lease expired").value
    ),
    "lease_expired_for_good": lambda c, j: (
        edges.lease_expired(c, j, now=LATER, run_at=None, error="lease expired").value
    ),
    "timed_out_with_retry": lambda c, j: _report(
        c, j, states.Edge.TIMED_OUT_WITH_RETRY, worker=None, error="ran too long", run_at=LATER
    ),
    "timed_out_for_good": lambda c, j: _report(
        c, j, states.Edge.TIMED_OUT_FOR_GOOD, worker=None, error="ran too long"
    ),
    "release": lambda c, j: edges.release(c, j.id, worker="w", attempt=1, now=LATER).value,
    "cancel": lambda c, j: edges.cancel(c, j, now=LATER, actor="admin").value,
    "retry": lambda c, j: edges.retry(c, j, now=LATER, actor="admin").value,
    "run_now": lambda c, j: edges.run_now(c, j, now=LATER, actor="admin").value,
}


def test_every_edge_has_its_function() -> None:
    assert set(MOVES) == set(EDGES)


def _events(conn: Connection, job_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(select(job_events).where(job_events.c.job_id == job_id))
    return [dict(row._mapping) for row in rows]


@pytest.mark.parametrize("name", sorted(EDGES))
def test_each_edge_moves_only_its_states_and_writes_one_event(
    app: Flask, backend: str, name: str
) -> None:
    edge = EDGES[name]
    for status in JobStatus:
        job = _job_in(app, status)
        with db.transaction(app) as conn:
            before = _events(conn, job.id)
            moved = MOVES[name](conn, job)
            after = _events(conn, job.id)
            now = jobs_sql.get_job(conn, job.id)
        assert now is not None
        if status not in edge.sources:
            assert moved is None, (name, status)
            assert (after, now) == (before, job), (name, status)
            continue
        assert moved is not None and moved.id == job.id, (name, status)
        assert now.status == edge.target == moved.status, (name, status)
        new = after[len(before) :]
        assert [(e["kind"], e["from_status"], e["to_status"]) for e in new] == [
            (edge.kind, status, edge.target)
        ], (name, status)
        if edge.target is not JobStatus.RUNNING:
            assert now.lease_expires_at is None or edge.target is JobStatus.COMPLETED


def test_holder_expectations_fence_a_transition(app: Flask, backend: str) -> None:
    job = _job_in(app, JobStatus.RUNNING)
    with db.transaction(app) as conn:
        for worker, attempt in [("someone-else", 1), ("w", 2)]:
            report = edges.Report(states.Edge.COMPLETE, job.id, attempt)
            assert edges.finish_many(conn, [report], worker=worker, now=LATER).value == {}
            assert (
                edges.release(conn, job.id, worker=worker, attempt=attempt, now=LATER).value is None
            )
        assert _events(conn, job.id)[-1]["kind"] == EventKind.ENQUEUED


def test_release_keeps_the_retry_count_and_is_due_at_once(app: Flask, backend: str) -> None:
    job = _job_in(app, JobStatus.RUNNING)
    with db.transaction(app) as conn:
        released = edges.release(conn, job.id, worker="w", attempt=1, now=LATER).value
    assert released is not None
    assert (released.status, released.retry_count, released.attempts) == ("pending", 0, 1)
    assert (released.run_at, released.worker_id, released.lease_expires_at) == (LATER, None, None)
