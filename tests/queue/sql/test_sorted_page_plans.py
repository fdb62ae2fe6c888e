"""The jobs list's other orders read along the indexes that keep them (SQLite's plans of the
statements each page really runs): no table scan, no walk of an index of every job, and the
index each read is meant for."""

from __future__ import annotations

from dataclasses import replace

import pytest
from flask import Flask

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming, listing, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import JobFilters
from app.queue.vocabulary.orders import Sort, SortKey
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import make_job
from tests.queue.sql.test_query_plans import (
    _plan_lines,
    recorded,
    seed,
    table_scans,
)

# The partial indexes a read may walk whole: they hold only the few jobs it wants.
PARTIAL = ("ix_jobs_waiting",)
# (order, status, viewer) -> an index the plan must name
EXPECTED = {
    ("-priority", "pending", "admin"): "ix_jobs_claim",
    ("run_at", "pending", "admin"): "ix_jobs_claim",
    ("-priority", "pending", "producer"): "ix_jobs_owner_status_run_at",
    ("run_at", "pending", "producer"): "ix_jobs_owner_status_run_at",
    ("-priority", "pending", "worker"): "ix_job_holders_pending",
    ("run_at", "pending", "worker"): "ix_job_holders_pending",
    ("-updated", "running", "admin"): "ix_jobs_running_seen",
    ("-updated", "running", "producer"): "ix_jobs_running_seen",
    ("-updated", "running", "worker"): "ix_jobs_running_seen",
    ("-updated", "completed", "admin"): "ix_jobs_status_finished",
    ("updated", "failed", "producer"): "ix_jobs_status_finished",
    ("-updated", "completed", "worker"): "ix_jobs_status_finished",
}


def more_seed(app: Flask, producer: Actor, worker: Actor) -> None:
    """Beside the plan tests' seed: jobs of every priority, one waiting for a parent, a retry
    the worker gave back, and jobs it runs."""
    settings = queue_settings()
    with db.transaction() as conn:
        for priority in ("low", "medium", "low"):
            make_job(conn, producer, settings, priority=priority)
        parent = make_job(conn, producer, settings, run_at="2099-01-01T00:00:00Z")
        make_job(conn, producer, settings, depends_on=[parent.id])
        # Three claims first, then the retry: a retry claimed again at once (its backoff has
        # full jitter, so it may be due in a few milliseconds) would leave the worker none.
        claimed = [claiming.claim(conn, worker, now=utcnow(), settings=settings) for _ in range(3)]
        retried = claimed[0]
        assert retried is not None and all(job is not None for job in claimed)
        reports.fail(conn, worker, retried.id, now=utcnow(), settings=settings, error="x")


@pytest.mark.parametrize(("order", "status", "who"), list(EXPECTED))
def test_each_order_reads_the_index_that_keeps_it(
    app: Flask, order: str, status: str, who: str
) -> None:
    with app.app_context():
        producer, worker, admin = seed(app)
        more_seed(app, producer, worker)
        actor = {"admin": admin, "producer": producer, "worker": worker}[who]
        first = JobFilters(status=status, sort=Sort.parse(order), limit=2)
        with db.read() as conn:
            page = listing.page(conn, actor, first)
        assert page.jobs, "the seed has jobs of this status for this viewer"
        pages = [first, replace(first, type="email.send"), replace(first, priority=0)]
        if page.next_cursor:
            from app.queue.contract.cursors import decode_cursor

            pages.append(replace(first, cursor=decode_cursor(page.next_cursor)[1]))
        for filters in pages:
            with recorded(app) as statements, db.read() as conn:
                found = listing.page(conn, actor, filters)
            scans = table_scans(app, statements)
            assert [line for line in scans if not line.startswith("SCAN anon_")] == []
            lines = _plan_lines(app, statements)
            walks = [line for line in lines if line.startswith("SCAN jobs USING")]
            assert all(any(index in line for index in PARTIAL) for line in walks), walks
            if found.jobs:  # none: the counters said so, and nothing was read
                assert any(EXPECTED[order, status, who] in line for line in lines), lines


def test_the_order_of_creation_still_reads_as_before(app: Flask) -> None:
    """Oldest first walks the same indexes the other way."""
    with app.app_context():
        producer, _, admin = seed(app)
        for actor, status in ((admin, None), (admin, "failed"), (producer, "pending")):
            filters = JobFilters(status=status, sort=Sort(SortKey.CREATED, descending=False))
            with recorded(app) as statements, db.read() as conn:
                page = listing.page(conn, actor, filters)
            assert page.jobs == sorted(page.jobs, key=lambda job: job.id)
            # Everyone's oldest: the table from its start, stopping at LIMIT (as the newest)
            oldest = "WHERE 1 = 1 ORDER BY jobs.id ASC"
            assert [line for line in table_scans(app, statements) if oldest not in line] == []
