"""Dependencies at scale, on SQLite at ``synchronous=FULL``: ``make bench SECTION=workflow``.

* Fan-in: 10,000 jobs wait on one parent. Completing the parent (one transaction: the finish,
  the release of every child) and failing another (the cancellation of its 10,000 children,
  each with its event) are timed. Goal: at most 2 s each.
* The claim against waiting jobs: a queue of ``BENCH_WORKFLOW_JOBS`` jobs (default 1,000,000)
  loaded as the scale bench loads it, and a copy of it with 100,000 jobs waiting for a running
  parent added; the claim's p50 on each, sampled in turns. Goal: at most 1.2 times. Each claim
  is rolled back, so every sample claims from the same queue.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from flask import Flask

from app import create_app
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.batch_requests import BatchItem
from app.queue.usecases import claiming, enqueueing, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import Role
from app.queue.vocabulary.timeutil import utcnow
from app.storage import migrate
from bench import SECRET
from bench import scale_load as load
from devservers.accounts import make_user

FAN = 10_000
WAITING = 100_000
SAMPLES = 200


def _actors(app: Flask) -> tuple[Actor, Actor]:
    return make_user(app, "fan", "producer").actor(), make_user(app, "fanw", "worker").actor()


def fan_in(folder: Path) -> dict[str, float]:
    """Seconds to complete (and to fail) a parent that 10,000 jobs wait for."""
    app = create_app({"SECRET_KEY": SECRET, "DATABASE_URL": f"sqlite:///{folder / 'fan.db'}"})
    migrate.upgrade(db.engine(app))
    figures = {}
    with app.app_context():
        producer, worker = _actors(app)
        settings = queue_settings()
        for outcome in ("completed", "failed"):
            with db.transaction() as conn:
                item = BatchItem.parse({"type": "email.send", "max_retries": 0}, settings)
                parent, _ = enqueueing.enqueue(
                    conn, producer, item.to_request(), now=utcnow()
                ).value
            for _ in range(FAN // 1000):
                child = BatchItem.parse({"type": "email.send", "depends_on": [parent.id]}, settings)
                with db.transaction() as conn:
                    enqueueing.enqueue_many(
                        conn, producer, [child.to_request()] * 1000, now=utcnow()
                    )
            with db.transaction() as conn:
                claimed = claiming.claim(conn, worker, now=utcnow(), settings=settings)
            assert claimed is not None and claimed.id == parent.id
            started = time.perf_counter()
            with db.transaction() as conn:
                if outcome == "completed":
                    reports.complete(conn, worker, parent.id, now=utcnow(), attempt=1)
                else:
                    reports.fail(
                        conn,
                        worker,
                        parent.id,
                        now=utcnow(),
                        settings=settings,
                        error="x",
                        attempt=1,
                        retryable=False,
                    )
            figures[outcome] = time.perf_counter() - started
            with db.read() as conn:
                statuses = conn.exec_driver_sql(
                    "SELECT status, count(*) FROM jobs WHERE id IN (SELECT child_id FROM "
                    "job_dependencies WHERE parent_id = ?) GROUP BY status",
                    (parent.id,),
                ).all()
            print(f"  parent {outcome}: {figures[outcome]:.2f} s; children now {dict(statuses)}")
            with db.transaction() as conn:  # out of the way of the next round's claim
                conn.exec_driver_sql(
                    "UPDATE jobs SET status = 'completed', "
                    "finished_at = updated_at WHERE status = 'pending'"
                )
    db.engine(app).dispose()
    return figures


def _claim(app: Flask, worker: Actor) -> float:
    """Seconds of a claim of one job (rolled back: the queue stays as it is)."""
    with app.app_context(), db.engine(app).connect() as conn:
        started = time.perf_counter()
        claimed = claiming.claim(conn, worker, now=utcnow(), settings=queue_settings())
        took = time.perf_counter() - started
        assert claimed is not None
        conn.rollback()
    return took


def claim_with_waiting(folder: Path, size: int) -> tuple[float, float]:
    """The claim's p50 on a queue of ``size`` jobs and on a copy of it with 100,000 waiting
    jobs added, sampled in turns so a busy moment of the machine falls on both alike."""
    path, copy = folder / "scale.db", folder / "waiting.db"
    app = create_app({"SECRET_KEY": SECRET, "DATABASE_URL": f"sqlite:///{path}"})
    ids = load.prepare(app)
    started = time.perf_counter()
    load.load_sqlite(str(path), size, ids)
    load.upgrade(app)
    load.analyze(app)
    db.engine(app).dispose()
    shutil.copy(path, copy)
    _add_waiting(str(copy), ids)
    print(f"  {size:,} jobs loaded and migrated in {time.perf_counter() - started:.0f} s")
    waiting = create_app({"SECRET_KEY": SECRET, "DATABASE_URL": f"sqlite:///{copy}"})
    load.analyze(waiting)
    worker = Actor(ids[load.WORKERS[1]], load.WORKERS[1], Role.WORKER)
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(SAMPLES):
        for queue, taken in zip((app, waiting), samples, strict=True):
            taken.append(_claim(queue, worker))
    for queue in (app, waiting):
        db.engine(queue).dispose()
    return statistics.median(samples[0]), statistics.median(samples[1])


def _add_waiting(path: str, ids: dict[str, int]) -> None:
    """100,000 pending jobs of every priority, waiting for a running parent."""
    conn = sqlite3.connect(path, isolation_level=None)
    (parent,) = conn.execute("SELECT id FROM jobs WHERE status = 'running' LIMIT 1").fetchone()
    (top,) = conn.execute("SELECT max(id) FROM jobs").fetchone()
    stamp = load._stamp(utcnow())
    rows = [
        (
            top + i,
            "email.send",
            "{}",
            (i % 4) * 10,
            ids[load.PRODUCERS[0]],
            stamp,
            stamp,
            stamp,
            json.dumps([parent]),
            json.dumps([parent]),
        )
        for i in range(1, WAITING + 1)
    ]
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO jobs (id, type, payload, priority, created_by, run_at, created_at, "
        "updated_at, depends_on, waiting_for) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.executemany(
        "INSERT INTO job_dependencies (parent_id, child_id, on_failure) VALUES (?, ?, 'cancel')",
        [(parent, row[0]) for row in rows],
    )
    conn.execute("UPDATE jobs SET has_dependents = true WHERE id = ?", (parent,))
    conn.execute("COMMIT")
    conn.close()


def run(folder: Path) -> None:
    """The section of ``make bench SECTION=workflow``, in ``folder``."""
    size = int(os.environ.get("BENCH_WORKFLOW_JOBS", "1000000"))
    print(f"fan-in of {FAN:,} jobs on one parent (SQLite, synchronous=FULL):")
    figures = fan_in(folder)
    for outcome, seconds in figures.items():
        print(f"  {outcome}: {seconds:.2f} s (goal <= 2 s: {'ok' if seconds <= 2 else 'MISSED'})")
    print(f"claim p50 at {size:,} jobs, without and with {WAITING:,} waiting:")
    before, after = claim_with_waiting(folder, size)
    ratio = after / before
    print(
        f"  {before * 1000:.2f} ms -> {after * 1000:.2f} ms: {ratio:.2f}x "
        f"(goal <= 1.2: {'ok' if ratio <= 1.2 else 'MISSED'})"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="queuelog-workflow-") as tmp:
        run(Path(tmp))
