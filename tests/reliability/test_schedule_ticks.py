"""Real processes ticking the same schedules on one database (a SQLite file, then
PostgreSQL): across slot boundaries, every slot gives exactly one job. The clock is a
parameter: all processes tick the same simulated instants, released together by a barrier."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select

from app import create_app
from app.audit.actions import Origin
from app.infra import db, housekeeper
from app.infra.queue_settings import queue_settings
from app.queue.contract.schedules import ScheduleCreate, parse
from app.queue.rules import cron
from app.queue.usecases import schedules
from app.storage.schema import job_events, jobs
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_user
from tests.conftest import base_config
from tests.reliability.forks import started

pytestmark = pytest.mark.slow

PROCESSES = 4
START = datetime(2030, 1, 1, 9, 59, 40, tzinfo=UTC)
STEP = timedelta(seconds=7)
STEPS = 50  # 5 min 43 s of simulated time: six minute boundaries
CRONS = {"every-minute": "* * * * *", "every-two": "*/2 * * * *", "hourly": "0 * * * *"}
TIMEOUT = 60


def _ticker(url: str, barrier: Any, results: Any, index: int) -> None:
    """One process: tick at every simulated instant, report how many jobs it enqueued."""
    app = create_app(base_config(url))
    won: Counter[str] = Counter()
    try:
        for step in range(STEPS):
            barrier.wait(TIMEOUT)
            # a few milliseconds apart, as real clocks would be
            now = START + step * STEP + timedelta(milliseconds=3 * index)
            for fired in housekeeper.housekeeping(app).fire_due(now):
                if fired.job is not None:
                    won[fired.schedule.name] += 1
        results.put((index, dict(won), None))
    except Exception as exc:  # reported to the test, which fails with it
        results.put((index, dict(won), repr(exc)))
        barrier.abort()
    finally:
        db.engine(app).dispose()


def _create_schedules(app: Flask) -> None:
    admin = make_user(app, "ticks-admin", "admin").actor()
    with app.app_context(), db.transaction() as conn:
        for name, expression in CRONS.items():
            request = parse(
                ScheduleCreate,
                {"name": name, "cron": expression, "type": "email.send"},
                queue_settings(),
            )
            schedules.create(conn, admin, request, now=START, origin=Origin(admin.name))


def test_processes_ticking_together_enqueue_one_job_per_slot(
    app: Flask, database_url: str, backend: str
) -> None:
    _create_schedules(app)
    context = multiprocessing.get_context("spawn")  # no engine or lock crosses a fork
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    processes = [
        context.Process(target=_ticker, args=(database_url, barrier, results, i))
        for i in range(PROCESSES)
    ]
    with started(processes, TIMEOUT):
        reports = [results.get(timeout=TIMEOUT * 2) for _ in processes]
    assert [error for _, _, error in reports if error] == []

    end = START + (STEPS - 1) * STEP + timedelta(milliseconds=3 * (PROCESSES - 1))
    expected = {
        name: [t for t in cron.upcoming(expression, "UTC", START, 10) if t <= end]
        for name, expression in CRONS.items()
    }
    assert [len(slots) for slots in expected.values()] == [6, 3, 1]
    with db.read(app) as conn:
        rows = conn.execute(
            select(job_events.c.actor, jobs.c.created_at)
            .join(jobs, jobs.c.id == job_events.c.job_id)
            .where(job_events.c.kind == "enqueued")
            .order_by(jobs.c.id)
        ).all()
    made: dict[str, list[datetime]] = {name: [] for name in CRONS}
    for actor, created_at in rows:
        made[actor.removeprefix("schedule:")].append(created_at)
    for name, slots in expected.items():
        # one job per slot, each enqueued by the first tick at or after its slot
        assert len(made[name]) == len(slots), (name, made[name], slots)
        for slot, created in zip(slots, made[name], strict=True):
            assert slot <= created < slot + STEP + timedelta(milliseconds=10)
    won = Counter[str]()
    for _, counts, _ in reports:
        won.update(counts)
    assert dict(won) == {name: len(slots) for name, slots in expected.items()}
    winners = {index: sum(counts.values()) for index, counts, _ in reports}
    print(f"\n{PROCESSES} processes ticking on {backend}: jobs enqueued per process {winners}")
