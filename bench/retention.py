"""Retention while workers claim (``make bench SECTION=retention``): 100,000 jobs that finished
long ago (each with its three events) are pruned by the housekeeping tick's full pass (as
``flask jobs tick`` runs it) while worker processes claim and complete jobs, one transaction
each. The claim's p99 is printed against the same workers' p99 with no prune running, measured
in the same run (goal: at most 50 ms while pruning), on SQLite and, with
``BENCH_RETENTION_PG=1``, on a throwaway PostgreSQL server too (loading it takes minutes).
``BENCH_PRUNE_JOBS`` changes the 100,000.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from datetime import timedelta
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select

from app import create_app
from app.accounts import service as accounts
from app.infra import db, housekeeper
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming, reports
from app.queue.vocabulary.timeutil import utcnow
from app.storage import migrate
from app.storage.schema import job_events, jobs
from bench import SECRET
from devservers.accounts import AS_OPERATOR

WORKERS = 2  # claiming processes (the machine has 2 cores; the pruner is a third process)
BASELINE_SECONDS = 5.0
GOAL_MS = 50.0


def _app(url: str) -> Any:
    return create_app({"SECRET_KEY": SECRET, "DATABASE_URL": url, "SCHEDULE_TICK_SECONDS": 3600})


def _load(app: Any, old: int, due: int) -> None:
    """``old`` completed jobs finished 60 days ago, each with its enqueued, claimed and
    completed events, and ``due`` pending jobs for the workers."""
    long_ago = utcnow() - timedelta(days=60)
    now = utcnow()
    with app.app_context():
        with db.transaction() as conn:
            user = accounts.create_user(
                conn,
                accounts.OPERATOR,
                "w",
                "admin",
                now=now,
                origin=AS_OPERATOR,
            )
        base = {"type": "email.send", "payload": {}, "created_by": user.id}
        for start in range(0, old, 5_000):
            rows = [
                base | {"status": "completed", "attempts": 1, "run_at": long_ago,
                        "created_at": long_ago, "updated_at": long_ago,
                        "finished_at": long_ago, "progress": 100}
                for _ in range(min(5_000, old - start))
            ]  # fmt: skip
            with db.transaction() as conn:
                ids = conn.execute(insert(jobs).returning(jobs.c.id), rows).scalars().all()
                events = [
                    {"job_id": job_id, "at": long_ago, "from_status": before, "to_status": after,
                     "actor": "w", "attempt": 1, "kind": kind}
                    for job_id in ids
                    for before, after, kind in (
                        (None, "pending", "enqueued"),
                        ("pending", "running", "claimed"),
                        ("running", "completed", "completed"),
                    )
                ]  # fmt: skip
                conn.execute(insert(job_events), events)
        rows = [base | {"run_at": now, "created_at": now, "updated_at": now}] * due
        for start in range(0, due, 5_000):
            with db.transaction() as conn:
                conn.execute(insert(jobs), rows[start : start + 5_000])


def _worker(url: str, stop: Event, go: Event, out: Any) -> None:
    """Claim and complete jobs, one transaction each, until told to stop; send back each
    claim's duration (ms) while ``go`` was set."""
    app = _app(url)
    timings: list[float] = []
    with app.app_context():
        settings = queue_settings()
        with db.read() as conn:
            actor = accounts.get_user(conn, accounts.OPERATOR, "w").actor()
        while not stop.is_set():
            started = time.perf_counter()
            with db.transaction() as conn:
                job = claiming.claim(conn, actor, now=utcnow(), settings=settings)
            took = (time.perf_counter() - started) * 1000
            if go.is_set():
                timings.append(took)
            if job is None:
                time.sleep(0.01)
                continue
            with db.transaction() as conn:
                reports.complete(conn, actor, job.id, now=utcnow(), settings=settings)
    db.engine(app).dispose()
    out.put(timings)


def _claims_while(url: str, during: Any) -> tuple[list[float], Any]:
    """Run the workers, measure their claims while ``during()`` runs; its answer too."""
    ctx = multiprocessing.get_context("fork")
    stop, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, stop, go, out)) for _ in range(WORKERS)]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # warm: each worker's first claims compile their statements
    go.set()
    answer = during()
    stop.set()
    timings = [t for _ in procs for t in out.get(timeout=60)]
    for proc in procs:
        proc.join(timeout=30)
    return timings, answer


def _p(timings: list[float], q: float) -> float:
    return statistics.quantiles(timings, n=1000)[int(q * 1000) - 1] if len(timings) > 1 else 0.0


def _settle(app: Any) -> None:
    """What a database that has run a while has after a bulk load: planner statistics and, on
    PostgreSQL, its dirty pages written out, so the floor is not measured inside the load's
    own aftermath (without this, PostgreSQL's floor claims took 62 ms at p50 and the same
    claims 4.8 ms once the prune had begun)."""
    engine = db.engine(app)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("CHECKPOINT")


def measure(url: str, label: str, old: int) -> None:
    """Load, then claims without a prune (the floor) and claims during the full prune."""
    app = _app(url)
    migrate.upgrade(db.engine(app))
    started = time.perf_counter()
    _load(app, old, due=60_000)
    _settle(app)
    print(f"  {label}: loaded {old:,} old jobs in {time.perf_counter() - started:.0f} s")
    floor, _ = _claims_while(url, lambda: time.sleep(BASELINE_SECONDS))

    def prune() -> tuple[Any, float]:
        begun = time.perf_counter()
        with app.app_context():
            pruned = housekeeper.housekeeping(app).prune(utcnow())
        return pruned, time.perf_counter() - begun

    during, (pruned, seconds) = _claims_while(url, prune)
    with app.app_context(), db.read() as conn:
        left = len(conn.execute(select(jobs.c.id).where(jobs.c.status == "completed")).all())
    verdict = "within" if _p(during, 0.99) <= GOAL_MS else "OVER"
    print(
        f"  {label}: pruned {pruned.job_total:,} jobs and {pruned.events:,} events in "
        f"{seconds:.1f} s ({pruned.job_total / seconds:,.0f} jobs/s); "
        f"{left:,} completed jobs left (those the workers finished)"
    )
    for name, timings in (("no prune (floor)", floor), ("during the prune", during)):
        print(
            f"    claim {name:<18} {len(timings):>6} claims  p50 {_p(timings, 0.5):6.1f} ms  "
            f"p99 {_p(timings, 0.99):6.1f} ms  max {max(timings, default=0):6.1f} ms"
        )
    ratio = _p(during, 0.99) / max(_p(floor, 0.99), 0.001)
    print(f"    p99 during / floor: {ratio:.2f}; goal p99 <= {GOAL_MS:.0f} ms: {verdict}")
    db.engine(app).dispose()


def run(base: Path) -> None:
    """The retention section: SQLite, then PostgreSQL when asked for."""
    old = int(os.environ.get("BENCH_PRUNE_JOBS", "100000"))
    print(
        f"retention: a full prune of {old:,} old jobs while {WORKERS} worker processes claim "
        "and complete (one transaction each)"
    )
    measure(f"sqlite:///{base / 'retention.sqlite3'}", "SQLite (synchronous=FULL)", old)
    if os.environ.get("BENCH_RETENTION_PG") != "1":
        return
    from devservers.postgres import create_database, postgres_server

    with postgres_server(durable=True) as server:
        measure(create_database(server, "retention"), "PostgreSQL", old)
