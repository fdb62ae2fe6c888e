"""Two fair claims at once on PostgreSQL (two connections, the first still open): the second
passes over the job the first picked and takes the next one in turn, rather than waiting for
the first to end or finding nothing."""

from __future__ import annotations

import pytest
from flask import Flask
from sqlalchemy import text

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import make_job, make_user


@pytest.fixture
def backend() -> str:
    return "postgresql"  # SQLite's writers take turns: two claims are never at once


@pytest.mark.pg
def test_a_second_claim_passes_over_the_job_the_first_holds(app: Flask) -> None:
    producer = make_user(app, "at-once-producer", "producer").actor()
    worker = make_user(app, "at-once-worker", "worker").actor()
    with app.app_context():
        settings = queue_settings()
        with db.transaction() as conn:
            first_jobs = [make_job(conn, producer, settings, partition=p) for p in "abc"]
        engine = db.engine(app)
        with engine.connect() as one, engine.connect() as two:
            held = claiming.claim(one, worker, now=utcnow(), settings=settings)
            two.execute(text("SET LOCAL lock_timeout = '2s'"))
            other = claiming.claim(two, worker, now=utcnow(), settings=settings)
            assert held is not None and other is not None
            assert held.id != other.id
            assert {held.partition, other.partition} <= {"a", "b", "c"}
            one.rollback()
            two.rollback()
    assert len(first_jobs) == 3
