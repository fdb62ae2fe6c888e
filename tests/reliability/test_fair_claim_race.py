"""Four processes claiming partitioned jobs as fast as they can on one database (a SQLite file,
then PostgreSQL), single claims and claims of many, typed and untyped: every job is claimed
exactly once (on PostgreSQL the fair walk locks each job it picks, so concurrent walks pass over
it), no claim fails, and the queue drains."""

from __future__ import annotations

import multiprocessing
import random
import time
from typing import Any

import pytest
from flask import Flask

from app import create_app
from app.infra import db
from app.queue.rules.settings import QueueSettings
from app.queue.usecases import claiming, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import Role
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import job_events, jobs
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_job, make_user
from tests.conftest import base_config
from tests.reliability.forks import started
from tests.reliability.test_flow_limits import count_rows

pytestmark = pytest.mark.slow

PROCESSES = 4
PARTITIONS, PER_PARTITION, UNPARTITIONED = 12, 10, 20
CLAIMS = [{"max_jobs": 1}, {"max_jobs": 7}, {"max_jobs": 3, "types": ("report.build",)}]
DEADLINE = 60.0


def _worker(url: str, actor: Actor, barrier: Any, results: Any) -> None:
    """One process: claim and complete until a claim finds nothing; reports what it claimed."""
    app = create_app(base_config(url))
    settings = QueueSettings.from_config(app.config)
    rng = random.Random(actor.id)
    claimed: list[int] = []
    try:
        barrier.wait(DEADLINE)
        deadline, empty = time.monotonic() + DEADLINE, 0
        while empty < 5 and time.monotonic() < deadline:
            with db.transaction(app) as conn:
                batch = claiming.claim_many(
                    conn, actor, now=utcnow(), settings=settings, **rng.choice(CLAIMS)
                ).jobs
            for job in batch:
                with db.transaction(app) as conn:
                    reports.complete(conn, actor, job.id, now=utcnow(), attempt=job.attempts)
            claimed += [job.id for job in batch]
            empty = 0 if batch else empty + 1
        results.put((claimed, None))
    except Exception as exc:  # reported to the test, which fails with it
        results.put((claimed, repr(exc)))
        barrier.abort()
    finally:
        db.engine(app).dispose()


def test_every_partitioned_job_is_claimed_once(app: Flask, database_url: str) -> None:
    producer = make_user(app, "fair-producer", "producer").actor()
    settings = QueueSettings.from_config(app.config)
    with db.transaction(app) as conn:
        for _ in range(PER_PARTITION):
            for p in range(PARTITIONS):
                job_type = "report.build" if p % 3 == 0 else "email.send"
                make_job(conn, producer, settings, type=job_type, partition=f"p{p}")
        for _ in range(UNPARTITIONED):
            make_job(conn, producer, settings)
    actors = [
        Actor(make_user(app, f"fair-worker-{i}", "worker").id, f"fair-worker-{i}", Role.WORKER)
        for i in range(PROCESSES)
    ]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    barrier, results = context.Barrier(PROCESSES + 1), context.Queue()
    processes = [
        context.Process(target=_worker, args=(database_url, actor, barrier, results))
        for actor in actors
    ]
    with started(processes, DEADLINE):
        barrier.wait(DEADLINE)
        outcomes = [results.get(timeout=DEADLINE + 10) for _ in processes]
    assert [error for _, error in outcomes if error] == []
    claimed = [job_id for ids, _ in outcomes for job_id in ids]
    total = PARTITIONS * PER_PARTITION + UNPARTITIONED
    assert len(claimed) == len(set(claimed)) == total
    assert count_rows(app, jobs.c.status == "completed") == total
    assert count_rows(app, job_events.c.kind == "claimed") == total
