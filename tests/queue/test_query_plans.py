"""The queue's hot and dashboard queries are served by indexes on SQLite: no table scans.

Each test records the SQL a use case really runs (with its parameters) and asks SQLite for the
plan of every statement that reads ``jobs`` or ``job_events``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask
from sqlalchemy import event

from app import db
from app.queue import batches, due, service, stats
from app.queue.models import Actor, Outcome
from app.queue.requests import EnqueueBody, ListQuery
from app.queue_settings import queue_settings
from app.timeutil import utcnow
from tests.builders import make_job, make_user

Statement = tuple[str, Any]


@contextmanager
def recorded(app: Flask) -> Iterator[list[Statement]]:
    """Collect every (SQL, parameters) pair the app's engine executes in the block."""
    statements: list[Statement] = []

    def record(_conn: Any, _cursor: Any, sql: str, params: Any, *_: Any) -> None:
        statements.append((sql, params))

    engine = db.engine(app)
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _newest_page(sql: str) -> bool:
    """The unfiltered newest page walks the table backwards from its end and stops at LIMIT."""
    return "WHERE 1 = 1 ORDER BY jobs.id DESC" in sql and "LIMIT" in sql


def table_scans(app: Flask, statements: list[Statement]) -> list[str]:
    """Plan lines that read a whole table rather than an index."""
    scans = []
    raw = db.engine(app).raw_connection()
    try:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
                continue
            for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall():
                detail = str(row[-1])
                if detail.startswith("SCAN") and "INDEX" not in detail and not _newest_page(sql):
                    scans.append(f"{detail}  <-  {sql}")
    finally:
        raw.close()
    return scans


def seed(app: Flask) -> tuple[Actor, Actor, Actor]:
    """A few jobs in every state, so the planner has real tables to choose from."""
    producer = make_user(app, "plan-producer", "producer").actor()
    worker = make_user(app, "plan-worker", "worker").actor()
    admin = make_user(app, "plan-admin", "admin").actor()
    settings = queue_settings()
    with db.transaction() as conn:
        for i in range(30):
            make_job(conn, producer, settings, payload={"i": i})
        for i in range(10):
            job = service.claim(conn, worker, now=utcnow(), settings=settings)
            assert job is not None
            if i % 2:
                service.complete(conn, worker, job.id, now=utcnow())
            else:
                service.fail(
                    conn,
                    worker,
                    job.id,
                    now=utcnow(),
                    settings=settings,
                    error="x",
                    retryable=False,
                )
    return producer, worker, admin


def assert_index_served(app: Flask, use_case: Callable[[], object]) -> None:
    with recorded(app) as statements:
        use_case()
    assert statements, "the use case ran no SQL"
    assert table_scans(app, statements) == []


def test_dashboard_reads_indexes_only(app: Flask) -> None:
    with app.app_context():
        producer, worker, admin = seed(app)
        for actor in (admin, producer, worker):

            def figures(actor: Actor = actor) -> object:
                with db.read() as conn:
                    return stats.dashboard(conn, actor, now=utcnow())

            assert_index_served(app, figures)


def test_claim_and_recovery_read_indexes_only(app: Flask) -> None:
    with app.app_context():
        _, worker, _ = seed(app)

        def claim() -> object:
            with db.transaction() as conn:
                return service.claim(conn, worker, now=utcnow(), settings=queue_settings())

        assert_index_served(app, claim)


def test_listing_reads_indexes_only(app: Flask) -> None:
    with app.app_context():
        producer, _, admin = seed(app)
        for actor, args in [
            (admin, {}),
            (admin, {"status": "failed"}),
            (admin, {"type": "email.send"}),
            (producer, {"status": "pending"}),
        ]:

            def page(actor: Actor = actor, args: dict[str, str] = args) -> object:
                with db.read() as conn:
                    return service.list_jobs(
                        conn, actor, ListQuery.from_args(args, queue_settings()).to_filters()
                    )

            assert_index_served(app, page)


def _small_table(sql: str) -> bool:
    """The metric totals: one row per (family, type, label), a few hundred at most."""
    return "FROM metric_counters" in sql and "WHERE" not in sql


def test_metrics_scrape_reads_indexes_only(app: Flask) -> None:
    from app.monitoring import rollup

    with app.app_context():
        seed(app)

        def scrape() -> object:
            with db.transaction() as conn:
                rollup.roll_up(conn)
            with db.read() as conn:
                return (
                    rollup.job_counts(conn),
                    rollup.oldest_due(conn, queue_settings().job_types, utcnow()),
                )

        with recorded(app) as statements:
            scrape()
        assert statements
        assert [s for s in table_scans(app, statements) if not _small_table(s)] == []


def test_workers_page_reads_indexes_only(app: Flask) -> None:
    from app.monitoring.workers import workers

    with app.app_context():
        seed(app)

        def page() -> object:
            with db.read() as conn:
                return workers(conn, now=utcnow())

        assert_index_served(app, page)


def test_audit_pages_read_indexes_only(app: Flask) -> None:
    from app.audit import query, store
    from app.audit.actions import AuditAction

    with app.app_context():
        with db.transaction() as conn:
            for i in range(40):
                action = AuditAction.SIGN_IN if i % 2 else AuditAction.JOB_CANCEL
                store.append(conn, at=utcnow(), actor=f"a{i % 4}", action=action, target="x")
        for args in [
            {"actor": "a1"},
            {"action": "sign_in"},
            {"since": "2026-01-01", "until": "2026-01-02"},
            {"actor": "a2", "cursor": "30"},
        ]:

            def page(args: dict[str, str] = args) -> object:
                with db.read() as conn:
                    return query.audit_page(conn, query.parse_filters(args))

            assert_index_served(app, page)


def test_typed_claims_of_many_jobs_read_indexes_only(app: Flask) -> None:
    with app.app_context():
        _, worker, _ = seed(app)

        def claim() -> object:
            with db.transaction() as conn:
                return service.claim_many(
                    conn,
                    worker,
                    now=utcnow(),
                    settings=queue_settings(),
                    max_jobs=5,
                    types=("email.send", "report.build"),
                )

        with recorded(app) as statements:
            claimed = claim()
        assert claimed, "the typed claim found nothing to claim"
        assert any("INDEXED BY ix_jobs_claim" in sql and "type IN" in sql for sql, _ in statements)
        assert table_scans(app, statements) == []


def test_batch_enqueue_and_finish_read_indexes_only(app: Flask) -> None:
    with app.app_context():
        producer, worker, _ = seed(app)
        settings = queue_settings()
        requests = [
            EnqueueBody.parse({"type": "email.send", "idempotency_key": f"k{i}"}, settings)
            for i in range(3)
        ]
        with recorded(app) as statements, db.transaction() as conn:
            batches.enqueue_many(conn, producer, [r.to_request() for r in requests], now=utcnow())
            claimed = service.claim_many(conn, worker, now=utcnow(), settings=settings, max_jobs=3)
            outcomes = [Outcome(job.id, job.attempts, True, {"n": 1}) for job in claimed]
            finished = batches.finish(conn, worker, outcomes, now=utcnow(), settings=settings)
        assert [job.status for job in finished] == ["completed"] * 3  # type: ignore[union-attr]
        assert table_scans(app, statements) == []
        (move,) = [(sql, params) for sql, params in statements if "json_each" in sql]
        raw = db.engine(app).raw_connection()
        try:
            plan = [str(row[-1]) for row in raw.execute(f"EXPLAIN QUERY PLAN {move[0]}", move[1])]
        finally:
            raw.close()
        # The items lead and each finds its job by id (not: the worker's jobs, items per job).
        assert plan[0].startswith("SCAN json_each"), plan
        assert plan[1].startswith("SEARCH jobs USING INTEGER PRIMARY KEY"), plan


def test_a_waiting_claims_alarm_reads_partial_indexes(app: Flask) -> None:
    """When the clock next makes a job due: one entry of a partial index each, never a walk of
    every pending or running job."""
    with app.app_context():
        seed(app)
        with recorded(app) as statements, db.read() as conn:
            due.next_due_at(conn, utcnow())
        raw = db.engine(app).raw_connection()
        try:
            lines = [
                str(row[-1])
                for sql, params in statements
                for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            ]
        finally:
            raw.close()
        assert len(lines) == 2, lines
        assert [line.split()[4] for line in lines] == ["ix_jobs_pending", "ix_jobs_lease"], lines
