"""The queue's hot and dashboard queries are served by indexes on SQLite: no table scans.

Each test records the SQL a use case really runs (with its parameters) and asks SQLite for the
plan of every statement that reads ``jobs`` or ``job_events``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask
from sqlalchemy import Index, event

from app.audit.actions import Origin
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.cursors import encode_cursor
from app.queue.contract.job_requests import EnqueueBody, ListQuery
from app.queue.sql import due as due_sql
from app.queue.usecases import claiming, enqueueing, listing, reading, reports, stats
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import JobFilters, Keyset, Outcome
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import jobs
from tests.builders import Api, make_job, make_token, make_user

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


def plans(app: Flask, statements: list[Statement]) -> list[str]:
    """Each plan line of the statements that read or change rows, with its statement."""
    lines = []
    raw = db.engine(app).raw_connection()
    try:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
                continue
            for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall():
                lines.append(f"{row[-1]}  <-  {sql}")
    finally:
        raw.close()
    return lines


def table_scans(app: Flask, statements: list[Statement]) -> list[str]:
    """Plan lines that read a whole table rather than an index."""
    return [
        line
        for line in plans(app, statements)
        if line.startswith("SCAN")
        and not line.startswith("SCAN CONSTANT ROW")  # SELECT EXISTS (...): no table at all
        and "INDEX" not in line.partition("  <-  ")[0]
        and not _newest_page(line.partition("  <-  ")[2])
    ]


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
            job = claiming.claim(conn, worker, now=utcnow(), settings=settings)
            assert job is not None
            if i % 2:
                reports.complete(conn, worker, job.id, now=utcnow())
            else:
                reports.fail(
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
                return claiming.claim(conn, worker, now=utcnow(), settings=queue_settings())

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
                    return listing.page(
                        conn, actor, ListQuery.from_args(args, queue_settings()).to_filters()
                    )

            assert_index_served(app, page)


def _small_table(sql: str) -> bool:
    """The metric totals (one row per family, type and label: a few hundred at most), the
    workers' activity rings (60 minute slots per worker, kind and shard: bounded by the fleet,
    never by the jobs) and the running jobs' sample of the partition figures (at most
    ``RUNNING_SAMPLE`` rows, read along the lease index, then grouped)."""
    sampled = ") AS running GROUP BY" in sql and "LIMIT" in sql
    return (
        ("FROM metric_counters" in sql and "WHERE" not in sql)
        or "FROM worker_activity" in sql
        or sampled
    )


def test_metrics_scrape_reads_indexes_only(app: Flask, admin: Api) -> None:
    """The whole scrape, through its route: no statement walks the jobs or their events, even
    along an index, unless it is a partial index of the few rows it counts (``waiting_by_type``
    once walked every job by type to count those waiting for parents: 828 ms a scrape at a
    million jobs)."""
    with app.app_context():
        seed(app)
    with recorded(app) as statements:
        assert admin.get("/metrics").status_code == 200
    assert any("waiting_for IS NOT NULL" in sql for sql, _ in statements)
    assert [s for s in table_scans(app, statements) if not _small_table(s)] == []
    partial = {f"USING INDEX {index.name} " for index in jobs.indexes if _is_partial(index)}
    walks = [
        line
        for line in plans(app, statements)
        if line.startswith(("SCAN jobs", "SCAN job_events")) and not any(p in line for p in partial)
    ]
    assert walks == []


def _is_partial(index: Index) -> bool:
    return index.dialect_options["sqlite"]["where"] is not None


def test_workers_page_reads_indexes_only(app: Flask) -> None:
    from app.monitoring.workers import workers

    with app.app_context():
        _, worker, _ = seed(app)
        with db.transaction() as conn:  # a job running: its worker's lease end and heartbeat
            assert claiming.claim(conn, worker, now=utcnow(), settings=queue_settings())

        def page() -> object:
            with db.read() as conn:
                return workers(conn, now=utcnow())

        with recorded(app) as statements:
            page()
        assert any("FROM worker_activity" in sql for sql, _ in statements)
        assert [s for s in table_scans(app, statements) if not _small_table(s)] == []
        lines = _plan_lines(app, statements)  # one probe each, not a walk of its running jobs
        for index in ("ix_jobs_running_worker", "ix_jobs_running_seen"):
            assert any(f"INDEX {index} (worker_id=?)" in line for line in lines), lines


def test_a_workers_views_walk_its_holder_rows(app: Flask) -> None:
    with app.app_context():
        _, worker, _ = seed(app)
        with db.transaction() as conn:  # a pending retry: the dashboard looks for its age
            job = claiming.claim(conn, worker, now=utcnow(), settings=queue_settings())
            assert job is not None
            reports.fail(conn, worker, job.id, now=utcnow(), settings=queue_settings(), error="x")
        older = {"cursor": encode_cursor("before", job.id)}
        for args in [{}, {"status": "failed"}, {"type": "email.send"}, older]:

            def page(args: dict[str, str] = args) -> object:
                with db.read() as conn:
                    filters = ListQuery.from_args(args, queue_settings()).to_filters()
                    return listing.page(conn, worker, filters)

            assert_index_served(app, page)

        def views() -> object:
            with db.read() as conn:
                return (
                    stats.dashboard(conn, worker, now=utcnow()),
                    reading.get_job(conn, worker, job.id),
                )

        with recorded(app) as statements:
            views()
        assert sum("job_holders" in sql for sql, _ in statements) == 2
        assert table_scans(app, statements) == []


def test_audit_pages_read_indexes_only(app: Flask) -> None:
    from app.audit import queries as audit_queries
    from app.audit import store as audit_store
    from app.audit.actions import AuditAction

    with app.app_context():
        with db.transaction() as conn:
            for i in range(40):
                action = AuditAction.SIGN_IN if i % 2 else AuditAction.JOB_CANCEL
                audit_store.append(conn, at=utcnow(), actor=f"a{i % 4}", action=action, target="x")
        for args in [
            {"actor": "a1"},
            {"action": "sign_in"},
            {"since": "2026-01-01", "until": "2026-01-02"},
            {"actor": "a2", "cursor": "30"},
        ]:

            def page(args: dict[str, str] = args) -> object:
                with db.read() as conn:
                    return audit_queries.audit_page(conn, audit_queries.parse_filters(args))

            assert_index_served(app, page)


def test_typed_claims_of_many_jobs_read_indexes_only(app: Flask) -> None:
    with app.app_context():
        _, worker, _ = seed(app)

        def claim() -> object:
            with db.transaction() as conn:
                return claiming.claim_many(
                    conn,
                    worker,
                    now=utcnow(),
                    settings=queue_settings(),
                    max_jobs=5,
                    types=("email.send", "report.build"),
                ).jobs

        with recorded(app) as statements:
            claimed = claim()
        assert claimed, "the typed claim found nothing to claim"
        assert any("INDEXED BY ix_jobs_claim" in sql and "type IN" in sql for sql, _ in statements)
        assert table_scans(app, statements) == []


def _plan_lines(app: Flask, statements: list[Statement]) -> list[str]:
    raw = db.engine(app).raw_connection()
    try:
        return [
            f"{row[-1]}  <-  {sql}"
            for sql, params in statements
            if sql.lstrip().upper().startswith(("SELECT", "UPDATE"))
            for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
        ]
    finally:
        raw.close()


def test_claims_with_limits_and_pauses_read_indexes_only(app: Flask) -> None:
    """A paused type, a max_running and a rate_limit: the claim still walks the claim index
    (skipping held-back types), reads running jobs per type from the counters and the claim
    windows by key; claims of many and typed claims alike."""
    from app.queue.usecases import job_types
    from app.queue.usecases.job_types import TypeChange

    with app.app_context():
        _, worker, admin = seed(app)
        settings = queue_settings()
        with db.transaction() as conn:
            for job_type in settings.job_types:
                for i in range(5):
                    make_job(conn, admin, settings, type=job_type, payload={"i": i})
            for job_type, change in [
                ("email.send", {"paused": True}),
                ("report.build", {"max_running": 2}),
                ("webhook.deliver", {"rate_limit": "3/minute"}),
            ]:
                request = TypeChange.parse(change, settings)
                job_types.change(
                    conn,
                    admin,
                    settings,
                    job_type,
                    request,
                    now=utcnow(),
                    origin=Origin(admin.name),
                )
        for options, held_back in [
            ({"max_jobs": 1, "types": ("report.build", "webhook.deliver")}, "AND type IN"),
            ({"max_jobs": 10}, "AND type NOT IN"),
        ]:

            def claim(options: dict[str, Any] = options) -> object:
                with db.transaction() as conn:
                    return claiming.claim_many(
                        conn, worker, now=utcnow(), settings=settings, **options
                    ).jobs

            with recorded(app) as statements:
                claimed = claim()
            assert claimed, options
            assert table_scans(app, statements) == []
            assert any("INDEXED BY ix_jobs_claim" in s and held_back in s for s, _ in statements)
            lines = _plan_lines(app, statements)
            assert any("job_counts USING PRIMARY KEY" in line for line in lines), lines
            assert any("type_claim_windows USING INDEX" in line for line in lines), lines


def test_the_types_page_reads_the_counters_by_key(app: Flask) -> None:
    """Jobs per status of each type (``GET /types``): ranges of the counters' primary key, no
    read of jobs."""
    from app.queue.usecases import job_types

    with app.app_context():
        _, _, admin = seed(app)
        with recorded(app) as statements, db.read() as conn:
            job_types.list_types(conn, admin, queue_settings())
        lines = _plan_lines(app, statements)
        assert any("job_counts USING PRIMARY KEY (scope=? AND type=?)" in x for x in lines), lines
        assert not any(" jobs" in line.split("<-")[0] for line in lines), lines
        # type_overrides holds a row per type an admin changed: read whole, as every claim does
        scans = [s for s in table_scans(app, statements) if "FROM type_overrides" not in s]
        assert scans == []


def test_unique_enqueue_probes_its_partial_index(app: Flask) -> None:
    with app.app_context():
        producer, _, _ = seed(app)
        settings = queue_settings()

        def enqueue() -> object:
            with db.transaction() as conn:
                request = EnqueueBody.parse(
                    {"type": "email.send", "unique_key": "digest-7", "unique_for": 60}, settings
                ).to_request()
                return enqueueing.enqueue(conn, producer, request, now=utcnow()).value

        enqueue()
        with recorded(app) as statements:
            _, created = enqueue()  # type: ignore[misc]
        assert created is False
        assert table_scans(app, statements) == []
        assert any("ix_jobs_unique" in line for line in _plan_lines(app, statements))


def test_every_api_call_of_a_job_life_reads_indexes_only(app: Flask) -> None:
    """The token lookup and its touch, enqueue with its idempotency probe, each viewer's job and
    list shapes (both paging directions), events, claims, and every compare-and-set of a job."""
    with app.app_context():
        actors = seed(app)
    client = app.test_client()
    producer, worker, admin = (
        Api(client, make_token(app, name))
        for name in ("plan-producer", "plan-worker", "plan-admin")
    )

    def answered(caller: Api, call: str, body: Any = None) -> Any:
        method, _, path = call.rpartition(" ")
        response = caller.post(path, body) if method == "POST" else caller.get(path)
        assert response.status_code in (200, 201, 404), (call, response.get_json())
        return response.get_json()

    lists = ["/jobs", "/jobs?status=failed", "/jobs?type=email.send&priority=low", "/jobs?limit=2"]
    # An admin's search by idempotency key has no index without the owner (a scan): not here.
    searches = [["/jobs?q=key-1", "/jobs?q=3"], ["/jobs?q=3"], []]
    with recorded(app) as statements:
        job = producer.enqueue(idempotency_key="key-1")
        answered(producer, "POST /jobs", {"type": "email.send", "idempotency_key": "key-1"})
        held = worker.claim(types=["email.send"])
        assert held is not None
        work = f"POST /jobs/{held['id']}"
        answered(worker, f"{work}/heartbeat", {"progress": 5, "attempt": held["attempt"]})
        answered(worker, f"{work}/release", {"attempt": held["attempt"]})
        again = worker.claim()
        assert again is not None
        answered(
            worker, f"POST /jobs/{again['id']}/fail", {"error": "x", "attempt": again["attempt"]}
        )
        last = worker.claim()
        assert last is not None
        answered(worker, f"POST /jobs/{last['id']}/complete", {"attempt": last["attempt"]})
        answered(admin, f"POST /jobs/{job['id']}/cancel")
        answered(admin, f"POST /jobs/{job['id']}/retry")
        for caller, searched in zip((producer, worker, admin), searches, strict=True):
            answered(caller, f"/jobs/{held['id']}")
            answered(caller, f"/jobs/{held['id']}/events")
            for path in lists + searched:
                answered(caller, path)
            answered(caller, f"/jobs?limit=2&cursor={answered(caller, lists[-1])['next_cursor']}")
        with app.app_context(), db.read() as conn:  # the pages also page towards newer jobs
            for actor in actors:
                listing.page(conn, actor, JobFilters(limit=2, cursor=Keyset("after", (1,))))
    assert any("api_tokens" in sql for sql, _ in statements)
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
            enqueueing.enqueue_many(
                conn, producer, [r.to_request() for r in requests], now=utcnow()
            )
            claimed = claiming.claim_many(
                conn, worker, now=utcnow(), settings=settings, max_jobs=3
            ).jobs
            outcomes = [Outcome(job.id, job.attempts, True, {"n": 1}) for job in claimed]
            finished = reports.finish(conn, worker, outcomes, now=utcnow(), settings=settings).value
        assert [job.status for job in finished] == ["completed"] * 3  # type: ignore[union-attr]
        assert table_scans(app, statements) == []
        moves = [
            (sql, p) for sql, p in statements if sql.startswith("UPDATE") and "json_each" in sql
        ]
        plan = _plan_lines(app, moves)
        # The items lead and each finds its job by id (not: the worker's jobs, items per job).
        assert plan[0].startswith("SCAN json_each"), plan
        assert plan[1].startswith("SEARCH jobs USING INTEGER PRIMARY KEY"), plan


def test_a_waiting_claims_alarm_reads_partial_indexes(app: Flask) -> None:
    """When the clock next makes a job due: one entry of a partial index per priority and one
    for leases, never a walk of every pending or running job."""
    with app.app_context():
        seed(app)
        with recorded(app) as statements, db.read() as conn:
            due_sql.next_due_at(conn, utcnow())
        searches = [line for line in _plan_lines(app, statements) if "SEARCH jobs" in line]
        indexes = [line.split(" INDEX ")[1].split()[0] for line in searches]
        assert indexes == ["ix_jobs_claim"] * 4 + ["ix_jobs_lease"], searches
        assert all("(priority=? AND run_at>?)" in line for line in searches[:4]), searches
        assert table_scans(app, statements) == []
