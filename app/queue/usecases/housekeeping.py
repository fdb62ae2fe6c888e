"""Housekeeping ticks from the app: due schedules fire, attempts past their deadlines time out,
and retention prunes old finished jobs and audit rows. On the claim path (schedules and
time-outs at most once per SCHEDULE_TICK_SECONDS in each process, one retention batch at most
once per RETENTION_TICK_SECONDS) and all of it from ``flask jobs tick``. Each batch is its own
short transaction; between retention batches the write lock is left free at least as long as a
batch held it, so claims never queue behind a long prune."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta

from flask import Flask, current_app
from sqlalchemy.exc import SQLAlchemyError

from app.audit import store as audit_store
from app.infra import db, queue_settings
from app.queue.rules import retention
from app.queue.sql import schedules as schedules_sql
from app.queue.usecases import finishing, schedules
from app.queue.vocabulary.models import QueueSettings
from app.queue.vocabulary.timeutil import utcnow

EXTENSION_KEY = "queuelog.ticks"
RETENTION_KEY = "queuelog.ticks.retention"
log = logging.getLogger(__name__)


class Throttle:
    """Says yes at most once per ``interval`` seconds (monotonic clock), across threads."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._next = 0.0
        self._lock = threading.Lock()

    def ready(self) -> bool:
        """True when the interval has passed since the last yes (and starts a new one)."""
        with self._lock:
            now = time.monotonic()
            if now < self._next:
                return False
            self._next = now + self.interval
            return True


def init_app(app: Flask) -> None:
    """Give this process its claim-path throttle."""
    app.extensions[EXTENSION_KEY] = Throttle(float(app.config["SCHEDULE_TICK_SECONDS"]))
    # The claim path's retention throttle, and the size the last prune batch settled on.
    app.extensions[RETENTION_KEY] = (Throttle(float(app.config["RETENTION_TICK_SECONDS"])), {})


def _app(app: Flask | None) -> Flask:
    return app or current_app._get_current_object()  # type: ignore[attr-defined]


def _settings(app: Flask) -> QueueSettings:
    return app.extensions[queue_settings.EXTENSION_KEY]  # type: ignore[no-any-return]


def fire_due(now: datetime, app: Flask | None = None) -> list[schedules.Fired]:
    """Fire every schedule due at ``now``, a batch per transaction, until none is left or a
    batch claims nothing (the rest belongs to tickers in other processes)."""
    app = _app(app)
    settings = _settings(app)
    grace = timedelta(seconds=float(app.config["SCHEDULE_GRACE_SECONDS"]))
    fired: list[schedules.Fired] = []
    while True:
        # A read first: where writers take turns, the write lock is taken only when something
        # is due.
        with db.read(app) as conn:
            if not schedules_sql.any_due(conn, now):
                return fired
        with db.transaction(app) as conn:
            batch = schedules.tick(conn, now=now, settings=settings, grace=grace)
        if not batch:
            return fired
        fired += batch


def time_out_overdue(now: datetime, app: Flask | None = None, *, batches: int | None = None) -> int:
    """Fail the running attempts past their deadlines (max_run_seconds), a batch of
    RECOVER_BATCH per transaction, up to ``batches`` of them (None: all); how many moved."""
    app = _app(app)
    settings = _settings(app)
    with db.read(app) as conn:  # a read first: no write lock when no attempt is overdue
        if not finishing.any_overdue(conn, now):
            return 0
    total, done = 0, 0
    while batches is None or done < batches:
        with db.transaction(app) as conn:
            moved = finishing.sweep_overdue(
                conn, now=now, settings=settings, limit=settings.recover_batch
            )
        total, done = total + moved, done + 1
        if moved < settings.recover_batch:
            break
    return total


def prune(
    now: datetime, app: Flask | None = None, *, batches: int | None = None
) -> retention.Pruned:
    """Delete what retention says is old, batch by batch (up to ``batches`` of them, None:
    until nothing is left), each its own transaction of at most PRUNE_BATCH_SIZE jobs and
    audit rows, sized so that its deletes hold the write lock about ``retention.BATCH_SECONDS``
    beyond the commit any write pays, and with a pause as long as the batch after it. Records
    what went (the retention page)."""
    app = _app(app)
    settings = _settings(app)
    rules, largest = settings.retention, settings.prune_batch
    sizes: dict[str, int] = app.extensions[RETENTION_KEY][1]  # this process's last size
    audit_cutoff = rules.audit_cutoff(now)
    total, done, took = retention.Pruned(), 0, 0.0
    while batches is None or done < batches:
        time.sleep(took)
        size = sizes.setdefault("size", min(retention.MIN_BATCH, largest))
        with db.transaction(app) as conn:
            began = time.monotonic()  # the write lock is held from here to the commit's end
            step = retention.prune_jobs(conn, rules.job_cutoffs(now), size)
            if audit_cutoff is not None:
                audited = audit_store.prune(conn, before=audit_cutoff, batch=size)
                step += retention.Pruned(audit_events=audited)
            total += step
            if not total.nothing:
                retention.record(conn, total, at=now)
            worked = time.monotonic() - began
        took, done = time.monotonic() - began, done + 1
        # Sized by the deleting alone: the commit costs any write transaction the same.
        sizes["size"] = retention.next_batch(size, worked, largest=largest)
        if step.job_total < size and step.audit_events < size:
            break
    return total


def _housekeep(now: datetime, app: Flask) -> None:
    """The claim path's share: schedules and one batch of time-outs (per tick interval), one
    retention batch (per retention interval, and only when something is old)."""
    fire_due(now, app)
    time_out_overdue(now, app, batches=1)
    if app.extensions[RETENTION_KEY][0].ready() and anything_old(now, app):
        prune(now, app, batches=1)


def anything_old(now: datetime, app: Flask) -> bool:
    """Whether retention has anything to delete (a read: no write lock when nothing is old)."""
    rules = _settings(app).retention
    audit_cutoff = rules.audit_cutoff(now)
    with db.read(app) as conn:
        return retention.anything_old(conn, rules, now) or (
            audit_cutoff is not None and audit_store.any_before(conn, audit_cutoff)
        )


def on_claim() -> None:
    """The claim path's tick: cheap when nothing is due, and it never fails the claim."""
    if not current_app.extensions[EXTENSION_KEY].ready():
        return
    try:
        _housekeep(utcnow(), current_app._get_current_object())  # type: ignore[attr-defined]
    except SQLAlchemyError:
        log.exception("housekeeping tick failed; the next one retries")
