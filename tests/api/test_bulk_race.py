"""Two admins confirming the same bulk count at the same moment: one applies, the other is told
the count changed (409) and changes nothing. Real threads, each with its own connection, on
SQLite and on PostgreSQL (tests/api/conftest runs every test on both)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import func, insert, select

from app.infra import db
from app.queue.usecases import bulk_runs
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import audit_events, jobs, locks
from tests.api.conftest import assert_problem
from tests.builders import Api, make_api

JOBS = 60
HOUR = timedelta(hours=1)


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"BULK_BATCH_SIZE": 3}  # 20 short transactions: a long window for the other admin


def _count(app: Flask, table: Any, *where: Any) -> int:
    with app.app_context(), db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())


def test_two_admins_applying_the_same_count_at_once_apply_it_once(
    app: Flask, producer: Api
) -> None:
    assert (
        producer.post("/jobs/batch", {"jobs": [{"type": "email.send"}] * JOBS}).status_code == 201
    )
    admins = [make_api(app, app.test_client(), name, "admin") for name in ("ann", "bob")]
    body = {"action": "cancel", "filter": {}, "reason": "INC-9", "expect_count": JOBS}
    start = threading.Barrier(2)
    answers: dict[str, Any] = {}

    def confirm(admin: Api, name: str) -> None:
        start.wait(timeout=10)
        answers[name] = admin.post("/jobs/bulk", body)

    threads = [
        threading.Thread(target=confirm, args=(admin, name))
        for admin, name in zip(admins, ("ann", "bob"), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(r.status_code for r in answers.values()) == [200, 409]
    applied = next(r for r in answers.values() if r.status_code == 200).get_json()
    refused = assert_problem(next(r for r in answers.values() if r.status_code == 409), 409)
    assert applied["affected"] == JOBS and refused["count"] == 0
    assert _count(app, jobs, jobs.c.status == "cancelled") == JOBS
    assert _count(app, audit_events, audit_events.c.action == "job_bulk") == 1
    assert _count(app, locks) == 0  # let go once done


def test_an_apply_waits_for_the_one_in_progress_and_gives_up_with_409(
    app: Flask, producer: Api, admin: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock still held (by an apply in another process) past the wait: 409, nothing changed;
    once its holder's time has run out, the next apply takes it."""
    producer.enqueue()
    monkeypatch.setattr(bulk_runs, "LOCK_WAIT_SECONDS", 0.2)
    with app.app_context(), bulk_runs._bulk_lock():
        body = {"action": "cancel", "filter": {}, "reason": "INC-9", "expect_count": 1}
        problem = assert_problem(admin.post("/jobs/bulk", body), 409)
        assert "another bulk operation" in problem["detail"]
        assert _count(app, jobs, jobs.c.status == "cancelled") == 0
    with app.app_context(), db.transaction() as conn:  # a holder that died an hour ago
        conn.execute(insert(locks).values(name="bulk", holder="gone", expires_at=utcnow() - HOUR))
    assert admin.post("/jobs/bulk", body).status_code == 200
    assert _count(app, locks) == 0
