"""Eight processes claiming as fast as they can on one database (a SQLite file, then
PostgreSQL), single claims and claims of many, typed and untyped: ``max_running`` is never
exceeded (sampled all along by an outside reader, and replayed from the job events
afterwards), no rate-limit window holds more claims than its limit, and a paused type is never
handed out. The clock is a parameter: every process reads the same fast clock (ten simulated
seconds per real one), so the run crosses many rate-limit windows in little time."""

from __future__ import annotations

import math
import multiprocessing
import random
import time
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import func, select

from app import create_app
from app.audit.actions import Origin
from app.infra import db
from app.queue.rules.settings import QueueSettings
from app.queue.usecases import claiming, job_types, reports
from app.queue.usecases.job_types import TypeChange
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import Role
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import job_events, jobs
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_job, make_user
from tests.conftest import JOB_TYPES, base_config
from tests.reliability.forks import started, stopping

pytestmark = pytest.mark.slow

PROCESSES = 8
MAX_RUNNING, RATE = 3, 20  # report.build at most 3 at once; webhook.deliver 20 claims a second
CONFIG = {
    "JOB_TYPES": [*JOB_TYPES, "sms.send"],
    "JOB_TYPE_SETTINGS": {
        "report.build": {"max_running": MAX_RUNNING},
        "webhook.deliver": {"rate_limit": f"{RATE}/second"},
    },
}
JOBS = {"report.build": 60, "webhook.deliver": 60, "email.send": 30, "sms.send": 10}
SPEED = 10  # simulated seconds per real second
CLAIMS = [  # what the workers ask for, at random
    {"max_jobs": 1},
    {"max_jobs": 10},
    {"max_jobs": 100},
    {"max_jobs": 20, "types": ("report.build", "sms.send")},
    {"max_jobs": 5, "types": ("webhook.deliver", "email.send")},
]
DEADLINE = 90.0


@pytest.fixture
def app_config() -> dict[str, Any]:
    return CONFIG


class Clock:
    """The simulated time, the same in every process: ``start`` at the monotonic instant
    ``origin`` (system-wide), running ``SPEED`` times faster."""

    def __init__(self, start: datetime, origin: float) -> None:
        self.start, self.origin = start, origin

    def now(self) -> datetime:
        return self.start + timedelta(seconds=(time.monotonic() - self.origin) * SPEED)


def _worker(url: str, actor: Actor, clock: Clock, barrier: Any, stop: Any, results: Any) -> None:
    """One process: claim, then complete each job in a transaction of its own, until told to
    stop; reports how many jobs it claimed."""
    app = create_app(base_config(url, **CONFIG))
    settings = QueueSettings.from_config(app.config)
    rng = random.Random(actor.id)
    claimed = 0
    try:
        barrier.wait(DEADLINE)
        deadline = time.monotonic() + DEADLINE
        while not stop.is_set() and time.monotonic() < deadline:
            with db.transaction(app) as conn:
                batch = claiming.claim_many(
                    conn, actor, now=clock.now(), settings=settings, **rng.choice(CLAIMS)
                ).jobs
            for job in batch:
                with db.transaction(app) as conn:
                    reports.complete(conn, actor, job.id, now=clock.now(), attempt=job.attempts)
            claimed += len(batch)
            if not batch:
                time.sleep(0.01)  # nothing claimable now: let the others in
        results.put((actor.name, claimed, None))
    except Exception as exc:  # reported to the test, which fails with it
        results.put((actor.name, claimed, repr(exc)))
        barrier.abort()
    finally:
        db.engine(app).dispose()


def count_rows(app: Flask, *conditions: Any) -> int:
    """How many rows match ``conditions``, read on a connection of its own."""
    with db.read(app) as conn:
        return int(conn.execute(select(func.count()).where(*conditions)).scalar_one())


def _seed(app: Flask) -> list[Actor]:
    producer = make_user(app, "flow-producer", "producer").actor()
    admin = make_user(app, "flow-admin", "admin").actor()
    settings = QueueSettings.from_config(app.config)
    with db.transaction(app) as conn:
        for job_type, count in JOBS.items():
            for n in range(count):
                make_job(conn, producer, settings, type=job_type, payload={"n": n})
        paused = TypeChange.parse({"paused": True}, settings)
        job_types.change(
            conn, admin, settings, "sms.send", paused, now=utcnow(), origin=Origin(admin.name)
        )
    return [
        Actor(make_user(app, f"flow-worker-{i}", "worker").id, f"flow-worker-{i}", Role.WORKER)
        for i in range(PROCESSES)
    ]


def _replayed_peak(app: Flask, job_type: str) -> int:
    """The most jobs of ``job_type`` running at once, replaying its events in commit order
    (event ids: SQLite writers commit one at a time; on PostgreSQL a limited claim numbers its
    events after counting, under its type's lock)."""
    query = (
        select(job_events.c.from_status, job_events.c.to_status)
        .join(jobs, jobs.c.id == job_events.c.job_id)
        .where(jobs.c.type == job_type)
        .order_by(job_events.c.id)
    )
    running = peak = 0
    with db.read(app) as conn:
        for from_status, to_status in conn.execute(query):
            running += (to_status == "running") - (from_status == "running")
            peak = max(peak, running)
    return peak


def _claims_per_window(app: Flask, job_type: str) -> Counter[int]:
    """Claims of ``job_type`` per one-second window, by the (simulated) clock each claim ran
    with."""
    query = (
        select(job_events.c.at)
        .join(jobs, jobs.c.id == job_events.c.job_id)
        .where(jobs.c.type == job_type, job_events.c.kind == "claimed")
    )
    with db.read(app) as conn:
        return Counter(math.floor(at.timestamp()) for (at,) in conn.execute(query))


def test_limits_hold_while_eight_processes_claim(
    app: Flask, database_url: str, backend: str
) -> None:
    actors = _seed(app)
    # Forked from a clean server process that imported the app once: no engine or lock of
    # this process crosses into the workers, and eight of them start in a fraction of a second.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    barrier, stop, results = context.Barrier(PROCESSES + 1), context.Event(), context.Queue()
    clock = Clock(utcnow(), time.monotonic())  # every job is due from the start
    processes = [
        context.Process(target=_worker, args=(database_url, actor, clock, barrier, stop, results))
        for actor in actors
    ]
    samples, peak_seen = 0, 0
    report_running = (jobs.c.status == "running", jobs.c.type == "report.build")
    left = (jobs.c.status.in_(["pending", "running"]), jobs.c.type != "sms.send")
    with started(processes, DEADLINE), stopping(stop):
        barrier.wait(DEADLINE)
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:  # an outside reader, all along the run
            peak_seen = max(peak_seen, count_rows(app, *report_running))
            samples += 1
            assert count_rows(app, jobs.c.status == "running", jobs.c.type == "sms.send") == 0
            if count_rows(app, *left) == 0:
                break
            time.sleep(0.005)  # leave the cores to the workers between looks
        stop.set()
        reports = [results.get(timeout=DEADLINE) for _ in processes]
    assert [error for *_, error in reports if error] == []
    assert count_rows(app, *left) == 0, "the run ended before the queue drained"

    claims = sum(claimed for _, claimed, _ in reports)
    replayed = _replayed_peak(app, "report.build")
    windows = _claims_per_window(app, "webhook.deliver")
    print(
        f"\n{PROCESSES} processes on {backend}: {claims} claims; report.build running at most "
        f"{peak_seen} in {samples} samples and {replayed} replayed from the events "
        f"(max_running {MAX_RUNNING}); webhook.deliver at most {max(windows.values())} claims "
        f"per second over {len(windows)} windows (rate_limit {RATE}/second)"
    )
    assert peak_seen <= MAX_RUNNING and replayed <= MAX_RUNNING
    assert replayed == MAX_RUNNING, "the limit was never reached: the run proved nothing"
    assert max(windows.values()) <= RATE
    assert sum(windows.values()) == JOBS["webhook.deliver"]
    assert len(windows) >= math.ceil(JOBS["webhook.deliver"] / RATE)
    assert claims == sum(JOBS.values()) - JOBS["sms.send"]  # each job claimed exactly once
    assert (
        count_rows(app, jobs.c.type == "sms.send", jobs.c.status == "pending") == JOBS["sms.send"]
    )
    assert count_rows(app, jobs.c.status == "completed") == claims
