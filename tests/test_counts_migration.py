"""Migration 0009 on a database that already holds jobs: the upgrade fills the counts, holders
and minute rings from the jobs and their events; a downgrade takes them away again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from alembic import command
from flask import Flask
from sqlalchemy import inspect

import app.storage.schema_figures  # noqa: F401 (its tables are on the same metadata)
from app.audit.actions import Origin
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming, job_actions, reports
from app.queue.vocabulary.timeutil import utcnow
from app.storage import migrate
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_job, make_user
from tests.recount import assert_exact

BEFORE = "0008"


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"BACKOFF_BASE_SECONDS": 0}


def _downgrade(app: Flask) -> None:
    config = migrate.alembic_config()
    with db.engine(app).begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, BEFORE)


def _work(app: Flask) -> None:
    """Jobs in every status, one of them held by two workers, finished a moment ago."""
    producer = make_user(app, "old-producer", "producer").actor()
    workers = [make_user(app, f"old-worker-{i}", "worker").actor() for i in range(2)]
    admin = make_user(app, "old-admin", "admin").actor()
    now = utcnow() - timedelta(seconds=5)
    with app.app_context(), db.transaction(app) as conn:
        settings = queue_settings()
        jobs = [make_job(conn, producer, settings, now=now) for _ in range(6)]
        make_job(conn, admin, settings, now=now, priority="critical", type="report.build")
        first = claiming.claim_many(conn, workers[0], now=now, settings=settings, max_jobs=4).jobs
        reports.complete(conn, workers[0], first[0].id, now=now)
        reports.fail(conn, workers[0], first[1].id, now=now, settings=settings, error="x")
        reports.fail(
            conn, workers[0], first[2].id, now=now, settings=settings, error="x", retryable=False
        )
        job_actions.cancel(conn, admin, jobs[5].id, now=now, origin=Origin(admin.name))
        job_actions.retry(conn, admin, first[2].id, now=now, origin=Origin(admin.name))
        claiming.claim_many(conn, workers[1], now=now, settings=settings, max_jobs=2)


def test_the_upgrade_counts_what_is_there_and_the_downgrade_undoes_it(
    app: Flask, backend: str
) -> None:
    _work(app)  # a day's work, then the database as it was before the counters, with its jobs
    _downgrade(app)
    assert "job_counts" not in inspect(db.engine(app)).get_table_names()
    migrate.upgrade(db.engine(app))
    with db.read(app) as conn:
        assert_exact(conn, utcnow())
    _downgrade(app)  # and again, from the same jobs
    migrate.upgrade(db.engine(app))
    with db.read(app) as conn:
        assert_exact(conn, utcnow())
