"""``POST /jobs/{id}/retry`` with a body: an admin retries a failed or cancelled job with its
payload, priority or retry budget replaced, validated as at enqueue; the ``edited`` event and
the audit row name the fields, never their values; the counts per priority stay exact; bad
bodies and other roles change nothing. On SQLite and PostgreSQL (tests/api/conftest)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select, update
from sqlalchemy.exc import DatabaseError

from app.infra import db
from app.queue.vocabulary.states import PRIORITIES
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import audit_events, jobs
from tests.api.conftest import assert_problem, event_rows, finish, job_row, snapshot
from tests.builders import Api
from tests.recount import assert_exact

SECRETS = {"API_TOKEN": "hunter2-Sekr1t-edit-9c1d"}


def failed_job(producer: Api, worker: Api, **fields: Any) -> dict[str, Any]:
    """A job of ``producer`` that failed for good."""
    job = producer.enqueue(**fields)
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == job["id"]
    finish(worker, claimed, "failed")
    return job


def audit_rows(app: Flask) -> list[dict[str, Any]]:
    with app.app_context(), db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(select(audit_events).order_by("id"))]


def everything(app: Flask) -> Any:
    """Jobs, events and audit rows: what a refused request must leave as it was."""
    return snapshot(app), audit_rows(app)


def test_an_admin_edits_and_retries_a_failed_job(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = failed_job(producer, worker, payload={"to": "old@example.com"}, max_retries=0)
    body = {
        "payload": {"to": "new@example.com"},
        "priority": "high",
        "max_retries": 5,
        "reason": "bad address",
    }
    answer = admin.post(f"/jobs/{job['id']}/retry", body)
    assert answer.status_code == 200, answer.get_json()
    retried = answer.get_json()
    assert retried["status"] == "pending" and retried["retry_count"] == 0
    assert retried["payload"] == {"to": "new@example.com"}
    assert (retried["priority"], retried["max_retries"]) == ("high", 5)
    events = event_rows(app, job["id"])
    assert [e["kind"] for e in events[-2:]] == ["retried", "edited"]
    assert (events[-2]["from_status"], events[-2]["note"]) == ("failed", "bad address")
    edited = events[-1]
    assert edited["note"] == "changed payload, priority, max_retries"
    assert (edited["from_status"], edited["to_status"], edited["actor"]) == (
        "pending",
        "pending",
        "admin",
    )
    assert "new@example.com" not in str(events) and "old@example.com" not in str(events)
    audit = audit_rows(app)[-1]
    assert (audit["action"], audit["target"], audit["actor"]) == (
        "job_retry",
        f"job:{job['id']}",
        "admin",
    )
    assert audit["details"] == {
        "changed": ["payload", "priority", "max_retries"],
        "reason": "bad address",
    }
    assert worker.claim()["payload"] == {"to": "new@example.com"}  # type: ignore[index]


def test_only_the_fields_whose_value_changes_are_named(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = failed_job(producer, worker, payload={"n": 1}, priority="medium")
    body = {"payload": {"n": True}, "priority": "medium", "max_retries": 3}  # true is not 1
    assert admin.post(f"/jobs/{job['id']}/retry", body).status_code == 200
    assert event_rows(app, job["id"])[-1]["note"] == "changed payload"
    assert audit_rows(app)[-1]["details"] == {"changed": ["payload"]}
    assert job_row(app, job["id"])["payload"] == {"n": True}


@pytest.mark.parametrize("body", [None, {}, {"payload": {"to": "same@example.com"}}])
def test_a_retry_that_changes_nothing_writes_no_edited_event(
    app: Flask, producer: Api, worker: Api, admin: Api, body: Any
) -> None:
    job = failed_job(producer, worker, payload={"to": "same@example.com"})
    assert admin.post(f"/jobs/{job['id']}/retry", body).status_code == 200
    assert [e["kind"] for e in event_rows(app, job["id"])][-1] == "retried"
    assert "edited" not in [e["kind"] for e in event_rows(app, job["id"])]
    assert audit_rows(app)[-1]["details"] is None


def test_a_cancelled_job_is_edited_too(app: Flask, producer: Api, admin: Api) -> None:
    job = producer.enqueue(payload={"a": 1})
    assert producer.post(f"/jobs/{job['id']}/cancel").status_code == 200
    answer = admin.post(f"/jobs/{job['id']}/retry", {"payload": {"a": 2}}).get_json()
    assert (answer["status"], answer["payload"]) == ("pending", {"a": 2})
    assert [(e["kind"], e["from_status"]) for e in event_rows(app, job["id"])[-2:]] == [
        ("retried", "cancelled"),
        ("edited", "pending"),
    ]


@pytest.mark.parametrize(
    ("old", "new"), [("low", "critical"), ("critical", "low"), ("medium", "high")]
)
def test_the_counts_per_priority_stay_exact_after_a_priority_edit(
    app: Flask, producer: Api, worker: Api, admin: Api, old: str, new: str
) -> None:
    job = failed_job(admin, worker, priority=old)  # an admin's job: any priority
    producer.enqueue(priority="low")  # a bystander, counted beside it
    assert admin.post(f"/jobs/{job['id']}/retry", {"priority": new}).status_code == 200
    with app.app_context(), db.read() as conn:
        assert_exact(conn, utcnow())
    assert job_row(app, job["id"])["priority"] == PRIORITIES[new]
    for _ in range(2):  # the edited job runs at its new priority and finishes
        claimed = worker.claim()
        assert claimed is not None
        finish(worker, claimed)
        with app.app_context(), db.read() as conn:
            assert_exact(conn, utcnow())


def test_the_database_still_refuses_a_priority_change_outside_a_retry(
    app: Flask, producer: Api
) -> None:
    job = producer.enqueue(priority="low")
    repriced = update(jobs).where(jobs.c.id == job["id"]).values(priority=30)
    refused = pytest.raises(DatabaseError, match="priority only as an admin retries")
    with refused, app.app_context(), db.transaction() as conn:
        conn.execute(repriced)
    assert job_row(app, job["id"])["priority"] == 0


def test_an_edited_job_with_secrets_keeps_their_names_and_never_their_values(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = failed_job(producer, worker, secrets=SECRETS, payload={"to": "a@example.com"})
    answer = admin.post(f"/jobs/{job['id']}/retry", {"payload": {"to": "b@example.com"}})
    assert answer.status_code == 200
    assert answer.get_json()["secret_names"] == ["API_TOKEN"]
    assert job_row(app, job["id"])["secrets_sealed"] is None  # erased when it failed, still
    claimed = worker.claim()
    assert claimed is not None and claimed["secrets"] == {}
    assert SECRETS["API_TOKEN"] not in str(everything(app))


def test_a_body_with_secrets_is_refused(app: Flask, producer: Api, worker: Api, admin: Api) -> None:
    job = failed_job(producer, worker)
    before = everything(app)
    body = assert_problem(admin.post(f"/jobs/{job['id']}/retry", {"secrets": SECRETS}), 422)
    assert body["errors"] == {"secrets": "unknown field"}
    assert SECRETS["API_TOKEN"] not in str(body)
    assert everything(app) == before


BAD_BODIES = {
    "payload a list": ({"payload": [1]}, "payload"),
    "payload a string": ({"payload": "{}"}, "payload"),
    "payload null": ({"payload": None}, "payload"),
    "payload with NUL": ({"payload": {"a": "x\u0000"}}, "payload"),
    "payload too big": ({"payload": {"a": "x" * 70_000}}, "payload"),
    "priority unknown": ({"priority": "urgent"}, "priority"),
    "priority a number": ({"priority": 30}, "priority"),
    "priority null": ({"priority": None}, "priority"),
    "max_retries 26": ({"max_retries": 26}, "max_retries"),
    "max_retries -1": ({"max_retries": -1}, "max_retries"),
    "max_retries true": ({"max_retries": True}, "max_retries"),
    "max_retries a string": ({"max_retries": "3"}, "max_retries"),
    "max_retries a float": ({"max_retries": 3.5}, "max_retries"),
    "max_retries huge": ({"max_retries": 10**40}, "max_retries"),
    "reason empty": ({"reason": ""}, "reason"),
    "reason blank": ({"reason": " \u202e "}, "reason"),
    "reason too long": ({"reason": "x" * 201}, "reason"),
    "reason a number": ({"reason": 5}, "reason"),
    "unknown field": ({"type": "report.build"}, "type"),
    "run_at": ({"run_at": "2030-01-01T00:00:00Z"}, "run_at"),
}


@pytest.mark.parametrize(("body", "field"), BAD_BODIES.values(), ids=BAD_BODIES)
def test_a_bad_body_is_422_per_field_and_changes_nothing(
    app: Flask, producer: Api, worker: Api, admin: Api, body: Any, field: str
) -> None:
    job = failed_job(producer, worker)
    before = everything(app)
    problem = assert_problem(admin.post(f"/jobs/{job['id']}/retry", body), 422)
    assert list(problem["errors"]) == [field]
    assert everything(app) == before


def test_one_bad_field_refuses_the_good_ones(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = failed_job(producer, worker)
    before = everything(app)
    body = {"payload": {"ok": 1}, "priority": "high", "max_retries": 99}
    assert list(assert_problem(admin.post(f"/jobs/{job['id']}/retry", body), 422)["errors"]) == [
        "max_retries"
    ]
    assert everything(app) == before


def test_editing_a_job_that_is_not_failed_or_cancelled_is_409(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    pending = producer.enqueue()
    before = everything(app)
    assert_problem(admin.post(f"/jobs/{pending['id']}/retry", {"priority": "high"}), 409)
    assert everything(app) == before
    assert_problem(admin.post("/jobs/999999/retry", {"priority": "high"}), 404)


@pytest.mark.parametrize("caller", ["producer", "other_producer", "worker", "anonymous"])
def test_only_admins_retry_with_or_without_changes(
    app: Flask, request: pytest.FixtureRequest, producer: Api, worker: Api, caller: str
) -> None:
    job = failed_job(producer, worker)
    api: Api = request.getfixturevalue(caller)
    before = everything(app)
    status = 401 if caller == "anonymous" else 403
    for body in ({"payload": {"x": 1}, "priority": "high"}, None):
        assert_problem(api.post(f"/jobs/{job['id']}/retry", body), status)
    assert everything(app) == before
