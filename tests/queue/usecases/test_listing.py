"""The jobs list's orders where its reads differ from the common case, on both engines (the
clock is the ``now`` argument): a worker whose job another worker took over, jobs waiting for
parents among pending ones, and the totals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from flask import Flask

from app.infra import db
from app.queue.rules.settings import QueueSettings
from app.queue.usecases import claiming, listing
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import Job, JobFilters
from app.queue.vocabulary.orders import Sort
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_job, make_user

T0 = datetime(2030, 1, 1, 12, tzinfo=UTC)


def pages(app: Flask, actor: Actor, filters: JobFilters) -> list[int]:
    """Every job id of the list, page after page."""
    seen: list[int] = []
    while True:
        with db.read(app) as conn:
            page = listing.page(conn, actor, filters)
        seen += [job.id for job in page.jobs]
        if page.next_cursor is None:
            return seen
        from app.queue.contract.cursors import decode_cursor

        filters = JobFilters(**{**filters.__dict__, "cursor": decode_cursor(page.next_cursor)[1]})


@pytest.fixture
def settings(app: Flask) -> QueueSettings:
    return QueueSettings.from_config(app.config)


def claim(app: Flask, worker: Actor, settings: QueueSettings, at: datetime, **kw: object) -> Job:
    with db.transaction(app) as conn:
        job = claiming.claim(conn, worker, now=at, settings=settings, **kw)  # type: ignore[arg-type]
    assert job is not None
    return job


def test_a_worker_sees_its_running_jobs_and_those_taken_over(
    app: Flask, settings: QueueSettings
) -> None:
    producer = make_user(app, "shop", "producer").actor()
    w1, w2 = (make_user(app, name, "worker").actor() for name in ("w1", "w2"))
    with db.transaction(app) as conn:
        for n in range(4):
            make_job(conn, producer, settings, now=T0 + timedelta(seconds=n))
    lost = claim(app, w1, settings, T0, lease_seconds=10)
    kept = claim(app, w1, settings, T0 + timedelta(seconds=1), lease_seconds=86_400)
    later = T0 + timedelta(hours=2)  # w1's first lease ran out (a claim finds it so)...
    taken = [claim(app, w2, settings, later).id]
    later += timedelta(hours=2)  # ...and its retry came due: w2 runs it, and another one
    taken += [claim(app, w2, settings, later).id for _ in range(2)]
    assert lost.id in taken
    running = JobFilters(status="running", sort=Sort.parse("-updated"), limit=1)
    mine = pages(app, w1, running)
    assert set(mine) == {lost.id, kept.id}  # the one it lost, which another runs now, too
    assert len(mine) == 2
    admin = make_user(app, "root", "admin").actor()
    with db.read(app) as conn:
        every = listing.page(conn, admin, JobFilters(status="running", limit=50)).jobs
    latest = sorted(every, key=lambda job: (job.updated_at, job.id), reverse=True)
    assert pages(app, admin, running) == [job.id for job in latest]  # per worker, merged
    assert len(latest) == 3


def test_pending_jobs_waiting_for_parents_take_their_place_in_every_order(
    app: Flask, settings: QueueSettings
) -> None:
    producer = make_user(app, "shop", "producer", max_priority="high").actor()
    admin = make_user(app, "root", "admin").actor()
    with db.transaction(app) as conn:
        parent = make_job(conn, producer, settings, run_at="2099-01-01T00:00:00Z", now=T0)
        waiting = make_job(
            conn, producer, settings, type="report.build", priority="high",
            depends_on=[parent.id], now=T0,
        )  # fmt: skip
        due = [
            make_job(conn, producer, settings, type="report.build", priority=p, now=T0)
            for p in ("low", "high", "medium")
        ]
    by_priority = JobFilters(status="pending", sort=Sort.parse("-priority"), limit=2)
    for viewer in (admin, producer):
        ids = pages(app, viewer, by_priority)
        # high first (the waiting one was made first: same run time, lower id), then medium,
        # low; the parent (low, scheduled last) at the end
        assert ids == [waiting.id, due[1].id, due[2].id, due[0].id, parent.id], viewer
        typed = JobFilters(status="pending", type="report.build", sort=Sort.parse("run_at"))
        assert pages(app, viewer, typed) == [waiting.id, *(job.id for job in due)]
    with db.read(app) as conn:
        total = listing.total(conn, admin, JobFilters(status="pending", type="report.build"))
        searched = listing.total(conn, admin, JobFilters(search=str(waiting.id)))
    assert (total.count, total.exact) == (4, True)
    assert (searched.count, searched.exact) == (1, True)
