"""Each server process keeps house in a thread of its own (``app.queue.usecases.housekeeping``):
started by the process's first request (after any fork), it ticks every SCHEDULE_TICK_SECONDS
and runs a retention batch at most every RETENTION_TICK_SECONDS, so no request ever waits for
it. ``HOUSEKEEPING_THREAD`` false leaves it to ``flask jobs tick`` (the tests' apps do)."""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import timedelta

from flask import Flask, current_app
from sqlalchemy.exc import SQLAlchemyError

from app.infra import db, queue_settings
from app.queue.usecases.housekeeping import Housekeeping
from app.queue.vocabulary.timeutil import utcnow

EXTENSION_KEY = "queuelog.housekeeping"
log = logging.getLogger(__name__)


class Housekeeper:
    """This process's housekeeping thread (one per process, started once per pid)."""

    def __init__(self, housekeeping: Housekeeping, tick: float, retention_every: float) -> None:
        self.housekeeping = housekeeping
        self.tick_seconds = tick
        self.retention_every = retention_every
        self._pid = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread in this process, unless it runs already."""
        if self._pid == os.getpid():
            return  # every request asks: the answer is almost always this one
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid, self._stop = os.getpid(), threading.Event()
            self._thread = threading.Thread(
                target=self._run, name="queuelog-housekeeper", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread, once its tick under way has ended (tests and shutdown)."""
        self._stop.set()
        with self._lock:
            thread = self._thread if self._pid == os.getpid() else None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        next_retention = time.monotonic()
        while not self._stop.wait(self.tick_seconds):
            with_retention = time.monotonic() >= next_retention
            if with_retention:
                next_retention = time.monotonic() + self.retention_every
            try:
                self.housekeeping.tick(utcnow(), with_retention=with_retention)
            except SQLAlchemyError:
                log.exception("housekeeping tick failed; the next one retries")


def init_app(app: Flask) -> None:
    """Give the app its housekeeping, and its processes a housekeeper started by their first
    request (when ``HOUSEKEEPING_THREAD``)."""
    grace = timedelta(seconds=float(app.config["SCHEDULE_GRACE_SECONDS"]))
    keeping = Housekeeping(db.transactions(app), queue_settings.queue_settings(app), grace)
    keeper = Housekeeper(
        keeping,
        float(app.config["SCHEDULE_TICK_SECONDS"]),
        float(app.config["RETENTION_TICK_SECONDS"]),
    )
    app.extensions[EXTENSION_KEY] = keeper
    db.transactions(app).used_by(keeper.stop)
    if app.config["HOUSEKEEPING_THREAD"]:
        app.before_request(keeper.start)


def housekeeping(app: Flask | None = None) -> Housekeeping:
    """The housekeeping of ``app`` (or the current app), for ``flask jobs tick`` and tests."""
    keeper: Housekeeper = (app or current_app).extensions[EXTENSION_KEY]
    return keeper.housekeeping
