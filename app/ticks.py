"""Schedule ticks from the app: on the claim path (at most once per SCHEDULE_TICK_SECONDS in
each process) and from ``flask jobs tick``. Each batch of due schedules is one transaction."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta

from flask import Flask, current_app
from sqlalchemy.exc import SQLAlchemyError

from app import db
from app import queue_settings as app_settings
from app.queue.domain import schedules
from app.queue.domain.models import QueueSettings
from app.queue.engines import schedules as schedule_store
from app.timeutil import utcnow

EXTENSION_KEY = "queuelog.ticks"
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


def fire_due(now: datetime, app: Flask | None = None) -> list[schedules.Fired]:
    """Fire every schedule due at ``now``, a batch per transaction, until none is left or a
    batch claims nothing (the rest belongs to tickers in other processes)."""
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    settings: QueueSettings = app.extensions[app_settings.EXTENSION_KEY]
    grace = timedelta(seconds=float(app.config["SCHEDULE_GRACE_SECONDS"]))
    fired: list[schedules.Fired] = []
    while True:
        # A read first: on SQLite the write lock is taken only when something is due.
        with db.read(app) as conn:
            if not schedule_store.any_due(conn, now):
                return fired
        with db.transaction(app) as conn:
            batch = schedules.tick(conn, now=now, settings=settings, grace=grace)
        if not batch:
            return fired
        fired += batch


def on_claim() -> None:
    """The claim path's tick: cheap when nothing is due, and it never fails the claim."""
    if not current_app.extensions[EXTENSION_KEY].ready():
        return
    try:
        fire_due(utcnow())
    except SQLAlchemyError:
        log.exception("schedule tick failed; the next one retries")
