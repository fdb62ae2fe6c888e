"""The explainer's and the schedule ticks' queries are served by indexes on SQLite."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from flask import Flask

from app.audit.actions import Origin
from app.infra import db, housekeeper
from app.infra.queue_settings import queue_settings
from app.queue.contract.schedules import ScheduleCreate, parse
from app.queue.usecases import explain, schedules
from app.queue.vocabulary.timeutil import utcnow
from tests.queue.sql.test_query_plans import recorded, seed

TABLES = ("jobs", "job_events", "schedules")


def plans(app: Flask, use_case: Callable[[], object]) -> list[str]:
    """SQLite's plan lines for every query the use case runs."""
    with recorded(app) as statements:
        use_case()
    raw = db.engine(app).raw_connection()
    try:
        return [
            str(row[-1])
            for sql, params in statements
            if sql.lstrip().upper().startswith(("SELECT", "UPDATE"))
            for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
        ]
    finally:
        raw.close()


def table_scans(lines: list[str]) -> list[str]:
    """Lines reading a whole table (a bounded subquery's own rows are not a table)."""
    return [
        line
        for line in lines
        if line.startswith("SCAN") and line.split()[1] in TABLES and "INDEX" not in line
    ]


def test_explaining_jobs_reads_indexes_only(app: Flask) -> None:
    with app.app_context():
        _, _, admin = seed(app)
        for job_id in (30, 25, 1, 2):  # the back of the queue, pending, completed, failed

            def explained(job_id: int = job_id) -> object:
                with db.read() as conn:
                    return explain.explain(
                        conn,
                        admin,
                        job_id,
                        now=utcnow(),
                        idle_after=timedelta(minutes=5),
                        settings=queue_settings(),
                    )

            lines = plans(app, explained)
            assert lines and table_scans(lines) == [], lines
            assert not any("TEMP B-TREE" in line for line in lines), lines
            if job_id == 30:
                # the queue position: ranges of the claim index; the last poll: by its key
                assert any("ix_jobs_claim (priority=? AND run_at<?)" in line for line in lines)
                assert any("type_polls USING" in line for line in lines), "\n".join(lines)


def test_a_tick_reads_indexes_only(app: Flask) -> None:
    with app.app_context():
        _, _, admin = seed(app)
        settings = queue_settings()
        with db.transaction() as conn:
            for i in range(5):
                request = parse(
                    ScheduleCreate,
                    {"name": f"s{i}", "cron": "* * * * *", "type": "email.send"},
                    settings,
                )
                schedules.create(conn, admin, request, now=utcnow(), origin=Origin(admin.name))
        lines = plans(
            app, lambda: housekeeper.housekeeping().fire_due(utcnow() + timedelta(minutes=2))
        )
        assert any("ix_schedules_next_run_at" in line for line in lines), lines
        assert table_scans(lines) == [], lines
        idle = plans(
            app, lambda: housekeeper.housekeeping().fire_due(utcnow())
        )  # nothing due: one index probe
        reads = [line for line in idle if "schedules" in line]
        assert reads == ["SEARCH schedules USING INDEX ix_schedules_next_run_at (next_run_at<?)"]
