"""One process of the counter race: ``python -m tests.reliability.churn URL SEED OPS START``.

It waits for the START file, then runs OPS random operations through the service, each in its
own transaction, on a virtual clock every process shares (``clock``): enqueues and batch
enqueues, claims of several jobs with short leases, completes, failures with and without a
retry, releases, lease recovery, cancels and retries by an admin, and prunes. It prints what it
did as JSON.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, func, select

from app import create_app
from app.accounts import store as accounts_store
from app.audit.actions import Origin
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.job_requests import EnqueueBody
from app.queue.rules.settings import QueueSettings
from app.queue.usecases import claiming, enqueueing, job_actions, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import QueueError
from app.queue.vocabulary.jobs import EnqueueRequest, Job
from app.storage.schema import job_events
from tests.conftest import base_config
from tests.harness import T0

PRODUCERS = ("churn-p1", "churn-p2")
WORKERS = ("churn-w1", "churn-w2", "churn-w3")
ADMIN = "churn-admin"
STEP = timedelta(seconds=5)  # of virtual time per event written
PRUNE_AGE = timedelta(minutes=70)  # older than the hour the rings are checked over
TYPES = ("email.send", "report.build", "webhook.deliver")
PRIORITIES = ("low", "medium", "high")
# operation: weight
WEIGHTS = {
    "enqueue": 6, "enqueue_batch": 2, "claim": 6, "finish": 8, "recover": 1, "cancel": 2,
    "retry": 2, "prune": 1,
}  # fmt: skip


class Churn:
    """The operations, each given the transaction and the clock; refusals raise QueueError."""

    def __init__(self, rng: random.Random, settings: QueueSettings, actors: dict[str, Actor]):
        self.rng, self.settings, self.actors = rng, settings, actors
        self.known: list[int] = []  # ids this process enqueued
        self.held: list[tuple[Actor, Job]] = []  # (worker, the job as it claimed it)
        self.pruned = 0

    def _request(self) -> EnqueueRequest:
        body = {"type": self.rng.choice(TYPES), "priority": self.rng.choice(PRIORITIES)}
        return EnqueueBody.parse(body, self.settings).to_request()

    def _producer(self) -> Actor:
        return self.actors[self.rng.choice(PRODUCERS)]

    def enqueue(self, conn: Connection, now: datetime) -> None:
        job, _ = enqueueing.enqueue(conn, self._producer(), self._request(), now=now).value
        self.known.append(job.id)

    def enqueue_batch(self, conn: Connection, now: datetime) -> None:
        requests = [self._request() for _ in range(3)]
        added = enqueueing.enqueue_many(conn, self._producer(), requests, now=now).value
        self.known.extend(job.id for job, _ in added)

    def claim(self, conn: Connection, now: datetime) -> None:
        worker = self.actors[self.rng.choice(WORKERS)]
        jobs = claiming.claim_many(
            conn,
            worker,
            now=now,
            settings=self.settings,
            max_jobs=self.rng.randint(1, 3),
            lease_seconds=self.rng.choice((60, 300, 900)),
        ).jobs
        self.held.extend((worker, job) for job in jobs)

    def finish(self, conn: Connection, now: datetime) -> None:
        if not self.held:
            return
        worker, job = self.held.pop(self.rng.randrange(len(self.held)))
        way = self.rng.random()
        if way < 0.5:
            reports.complete(conn, worker, job.id, now=now, attempt=job.attempts)
        elif way < 0.85:
            reports.fail(
                conn, worker, job.id, now=now, settings=self.settings, error="boom",
                attempt=job.attempts, retryable=way < 0.75,
            )  # fmt: skip
        else:
            reports.release(conn, worker, job.id, now=now, attempt=job.attempts)

    def recover(self, conn: Connection, now: datetime) -> None:
        claiming.recover_expired(conn, now=now, settings=self.settings, limit=5)

    def cancel(self, conn: Connection, now: datetime) -> None:
        if self.known:
            job_actions.cancel(
                conn,
                self.actors[ADMIN],
                self.rng.choice(self.known),
                now=now,
                origin=Origin(self.actors[ADMIN].name),
            )

    def retry(self, conn: Connection, now: datetime) -> None:
        if self.known:
            job_actions.retry(
                conn,
                self.actors[ADMIN],
                self.rng.choice(self.known),
                now=now,
                origin=Origin(self.actors[ADMIN].name),
            )

    def prune(self, conn: Connection, now: datetime) -> None:
        self.pruned += job_actions.prune(conn, finished_before=now - PRUNE_AGE, batch=20)


def clock(conn: Connection) -> datetime:
    """The virtual time: ``STEP`` per event written so far, read in the transaction, so a
    later commit never carries an earlier time (exactly so on SQLite, whose writers take
    turns; within a few events on PostgreSQL)."""
    return T0 + STEP * (conn.execute(select(func.max(job_events.c.id))).scalar() or 0)


def _wait_for(start: Path) -> None:
    deadline = time.monotonic() + 60
    while not start.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the start file never came")
        time.sleep(0.005)


def main(url: str, seed: int, ops: int, start: Path) -> dict[str, int]:
    """Run ``ops`` operations once ``start`` exists; how many of each succeeded or were refused."""
    rng = random.Random(seed)
    app = create_app(base_config(url, LEASE_SECONDS=60, BACKOFF_BASE_SECONDS=60))
    done: Counter[str] = Counter()
    with app.app_context():
        with db.read() as conn:
            actors = {}
            for name in (*PRODUCERS, *WORKERS, ADMIN):
                user = accounts_store.user_by_name(conn, name)
                assert user is not None, name
                actors[name] = user.actor()
        churn = Churn(rng, queue_settings(), actors)
        chosen = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=ops)
        _wait_for(start)
        for name in chosen:
            try:
                with db.transaction() as conn:
                    getattr(churn, name)(conn, clock(conn))
                done[name] += 1
            except QueueError as exc:  # lost a race, or the job moved on meanwhile
                done[f"{name} refused ({type(exc).__name__})"] += 1
        db.engine().dispose()
    return {**done, "pruned jobs": churn.pruned}


if __name__ == "__main__":
    url, seed, ops, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    json.dump(main(url, seed, ops, start), sys.stdout)
