"""Retention: RETENTION (status -> seconds, merged over the defaults, null keeps forever) and
AUDIT_RETENTION, counted from the finish; the housekeeping ticks delete what is older in
bounded batches, with the events, keeping the per-status counters exact, and record what
went."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import delete, func, insert, select

from app import create_app
from app.audit.actions import Origin
from app.config import ConfigError
from app.infra import db, housekeeper
from app.queue.rules import retention
from app.queue.rules.retention import DAY, Retention
from app.queue.rules.settings import QueueSettings
from app.queue.usecases import claiming, job_actions, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import JobStatus
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import audit_events, job_events, jobs
from app.storage.schema_figures import job_counts
from tests.backends import every_backend  # noqa: F401
from tests.builders import make_job, make_user
from tests.conftest import base_config
from tests.queue.sql.test_statement_counts import counted
from tests.recount import kept_counts, recounted

NOW = datetime(2030, 6, 1, tzinfo=UTC)


def test_defaults_partial_objects_merge_and_null_keeps_forever() -> None:
    assert Retention.from_config({}, 365 * DAY) == Retention()
    rules = Retention.from_config({"failed": None, "completed": 60}, None)
    assert rules.jobs == {"completed": 60, "cancelled": 14 * DAY, "failed": None}
    assert rules.audit is None
    assert rules.job_cutoffs(NOW) == {
        JobStatus.CANCELLED: NOW - timedelta(days=14),
        JobStatus.COMPLETED: NOW - timedelta(seconds=60),
    }


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("RETENTION", [1], "must be an object"),
        ("RETENTION", {"pending": 60}, "unknown status(es) pending"),
        ("RETENTION", {"failed": 0}, "RETENTION['failed'] must be seconds"),
        ("RETENTION", {"failed": "7d"}, "RETENTION['failed'] must be seconds"),
        ("RETENTION", {"completed": True}, "must be seconds"),
        ("RETENTION", {"completed": 1.5}, "must be seconds"),
        ("AUDIT_RETENTION", -1, "AUDIT_RETENTION must be seconds"),
        ("AUDIT_RETENTION", 10**12, "AUDIT_RETENTION must be seconds"),
    ],
)
def test_bad_values_refuse_start_up(tmp_path: Path, setting: str, value: Any, words: str) -> None:
    config = base_config(f"sqlite:///{tmp_path / 'q.sqlite3'}", **{setting: value})
    with pytest.raises(ConfigError) as refused:
        create_app(config)
    assert words in str(refused.value)


def test_batches_shrink_while_they_hold_the_lock_too_long_and_grow_back() -> None:
    limit = retention.BATCH_SECONDS
    assert retention.next_batch(400, limit * 3, largest=500) == 200
    assert retention.next_batch(400, limit * 0.75, largest=500) == 400
    assert retention.next_batch(400, limit / 4, largest=500) == 500
    assert retention.next_batch(12, limit * 3, largest=500) == retention.MIN_BATCH
    assert retention.next_batch(3, limit / 4, largest=3) == 3


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {
        "RETENTION": {"completed": DAY, "failed": None},  # cancelled: the default 14 days
        "AUDIT_RETENTION": 30 * DAY,
        "PRUNE_BATCH_SIZE": 3,
    }


def _finished(app: Flask, producer: Actor, worker: Actor, status: str, at: datetime) -> int:
    """A job that reached ``status`` at ``at`` (after a claim, so it has a holder and events)."""
    settings = QueueSettings.from_config(app.config)
    with db.transaction(app) as conn:
        job = make_job(conn, producer, settings, now=at, max_retries=0)
        if status == "cancelled":
            return job_actions.cancel(
                conn, producer, job.id, now=at, origin=Origin(producer.name)
            ).value.id
        claimed = claiming.claim(conn, worker, now=at, settings=settings)
        assert claimed is not None and claimed.id == job.id
        if status == "completed":
            reports.complete(conn, worker, job.id, now=at)
        else:
            reports.fail(conn, worker, job.id, now=at, settings=settings, error="x")
    return job.id


def _ids(app: Flask) -> set[int]:
    with db.read(app) as conn:
        return set(conn.execute(select(jobs.c.id)).scalars())


def _everyone(app: Flask) -> dict[str, int]:
    c = job_counts.c
    query = select(*(func.sum(c[s]) for s in JobStatus)).where(c.scope == "*")
    with db.read(app) as conn:
        row = conn.execute(query).one()
    return {s.value: int(n or 0) for s, n in zip(JobStatus, row, strict=True)}


def test_the_tick_prunes_by_status_and_age_with_events_and_exact_counts(
    app: Flask, backend: str
) -> None:
    producer = make_user(app, "p", "producer").actor()
    worker = make_user(app, "w", "worker").actor()
    old_done = [
        _finished(app, producer, worker, "completed", NOW - timedelta(days=2)) for _ in range(4)
    ]
    young_done = _finished(app, producer, worker, "completed", NOW - timedelta(hours=23))
    old_failed = _finished(app, producer, worker, "failed", NOW - timedelta(days=400))
    old_cancelled = _finished(app, producer, worker, "cancelled", NOW - timedelta(days=15))
    young_cancelled = _finished(app, producer, worker, "cancelled", NOW - timedelta(days=13))
    with db.transaction(app) as conn:
        pending = make_job(
            conn, producer, QueueSettings.from_config(app.config), now=NOW - timedelta(days=90)
        )
        conn.execute(delete(audit_events))  # the rows of the setup's users and cancels
        conn.execute(insert(audit_events), [
            {"at": NOW - timedelta(days=31), "actor": "a", "action": "login"},
            {"at": NOW - timedelta(days=29), "actor": "a", "action": "login"},
        ])  # fmt: skip
    before = _everyone(app)
    with counted(app) as sent:
        pruned = housekeeper.housekeeping(app).prune(NOW)
    assert pruned.jobs == {"cancelled": 1, "completed": 4}
    assert pruned.events == 4 * 3 + 2 and pruned.audit_events == 1
    kept = {young_done, old_failed, young_cancelled, pending.id}
    assert _ids(app) == kept
    with db.read(app) as conn:
        assert set(conn.execute(select(job_events.c.job_id)).scalars()) == kept
        assert conn.execute(select(func.count()).select_from(audit_events)).scalar_one() == 1
        assert kept_counts(conn) == recounted(conn)  # the triggers took the deleted jobs out
        last = retention.last_prune(conn)
    assert _everyone(app) == before | {"completed": 1, "cancelled": 1}
    # Batches of 3: one cancelled and two completed jobs, then two completed: a DELETE per
    # status of each batch, each bounded by what the batch has room for.
    assert len([s for s in sent if s.lstrip().upper().startswith("DELETE FROM JOBS")]) == 3
    assert last is not None and (last.at, last.pruned) == (NOW, pruned)
    assert not (set(old_done) | {old_cancelled}) & _ids(app)
    again = housekeeper.housekeeping(app).prune(
        NOW
    )  # nothing left: nothing recorded over the last prune
    assert again.nothing
    with db.read(app) as conn:
        assert retention.last_prune(conn) == last


def test_a_background_tick_runs_one_bounded_batch(app: Flask, backend: str) -> None:
    producer = make_user(app, "p", "producer").actor()
    worker = make_user(app, "w", "worker").actor()
    for _ in range(5):
        _finished(app, producer, worker, "completed", utcnow() - timedelta(days=3))
    keeping = housekeeper.housekeeping(app)
    keeping.tick(utcnow(), with_retention=True)
    keeping.tick(utcnow(), with_retention=False)  # within RETENTION_TICK_SECONDS: no batch
    assert len(_ids(app)) == 2  # one batch of PRUNE_BATCH_SIZE (3) went
    with db.read(app) as conn:
        rules = QueueSettings.from_config(app.config).retention
        assert retention.anything_old(conn, rules, utcnow())
