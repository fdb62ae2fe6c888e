"""The housekeeping thread of a server process: started by its first request, it keeps house
without any request's help, and closing the app's database stops it first (no tick runs on a
database that is gone)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from app import create_app
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming, reading, reports
from app.queue.vocabulary.errors import NotFound
from app.queue.vocabulary.timeutil import utcnow
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_job, make_user
from tests.conftest import base_config

THREAD = "queuelog-housekeeper"


def _housekeepers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD and t.is_alive()]


def test_the_thread_prunes_by_itself_and_stops_when_the_database_closes(
    database_url: str,
) -> None:
    config = base_config(
        database_url,
        HOUSEKEEPING_THREAD=True,
        SCHEDULE_TICK_SECONDS=1,
        RETENTION_TICK_SECONDS=1,
        RETENTION={"completed": 60},
    )
    app = create_app(config)
    before = set(_housekeepers())
    try:
        producer = make_user(app, "prod", "producer").actor()
        worker = make_user(app, "work", "worker").actor()
        long_ago = utcnow() - timedelta(hours=1)
        with app.app_context(), db.transaction() as conn:
            job = make_job(conn, producer, queue_settings(), now=long_ago)
            claimed = claiming.claim(conn, worker, now=long_ago, settings=queue_settings())
            assert claimed is not None and claimed.id == job.id
            reports.complete(conn, worker, job.id, now=long_ago)
        assert app.test_client().get("/healthz").status_code == 200  # the first request
        started = set(_housekeepers()) - before
        assert len(started) == 1

        def pruned() -> bool:
            with app.app_context(), db.read() as conn:
                try:
                    reading.get_job(conn, producer, job.id)
                except NotFound:
                    return True
            return False

        deadline = time.monotonic() + 30
        while not pruned():
            assert time.monotonic() < deadline, "the housekeeper never pruned the old job"
            time.sleep(0.2)
    finally:
        db.close(app)
    assert not any(t.is_alive() for t in started)
