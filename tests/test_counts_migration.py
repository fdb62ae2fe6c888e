"""Migration 0009 on a database that already holds jobs: the upgrade fills the counts, holders
and minute rings from the jobs and their events, and a downgrade takes it all away again."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from alembic import command
from flask import Flask
from sqlalchemy import create_engine, inspect, text

from app import create_app, db, migrate
from app.queue import service
from app.queue_settings import queue_settings
from app.timeutil import utcnow
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_job, make_user
from tests.conftest import base_config
from tests.recount import assert_exact

BEFORE = "0008"
_databases = itertools.count(1)


def _server_sql(server: str, statement: str) -> None:
    engine = create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(statement))
    engine.dispose()


@pytest.fixture
def old_app(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Flask]:
    """An app on a database migrated to the revision before the counters."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    else:
        server = request.getfixturevalue("postgres_server_url")
        name = f"before_counts_{next(_databases)}"
        _server_sql(server, f"CREATE DATABASE {name}")
        url = f"{server}/{name}"
    app = create_app(base_config(url, BACKOFF_BASE_SECONDS=0))
    migrate.upgrade(app, BEFORE)
    yield app
    db.engine(app).dispose()
    if backend != "sqlite":
        _server_sql(server, f"DROP DATABASE {name} WITH (FORCE)")


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
        first = service.claim_many(conn, workers[0], now=now, settings=settings, max_jobs=4)
        service.complete(conn, workers[0], first[0].id, now=now)
        service.fail(conn, workers[0], first[1].id, now=now, settings=settings, error="x")
        service.fail(
            conn, workers[0], first[2].id, now=now, settings=settings, error="x", retryable=False
        )
        service.cancel(conn, admin, jobs[5].id, now=now)
        service.retry(conn, admin, first[2].id, now=now)
        service.claim_many(conn, workers[1], now=now, settings=settings, max_jobs=2)


def test_the_upgrade_counts_what_is_there_and_the_downgrade_undoes_it(
    old_app: Flask, backend: str
) -> None:
    _work(old_app)
    migrate.upgrade(old_app)
    with db.read(old_app) as conn:
        assert_exact(conn, utcnow())
    config = migrate.alembic_config()
    with db.engine(old_app).begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, BEFORE)
    tables = set(inspect(db.engine(old_app)).get_table_names())
    assert "job_counts" not in tables and "jobs" in tables
    migrate.upgrade(old_app)  # and again, from the same jobs
    with db.read(old_app) as conn:
        assert_exact(conn, utcnow())
