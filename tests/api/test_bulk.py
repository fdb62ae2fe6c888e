"""``POST /jobs/bulk``: a preview changes nothing; a stale count is refused; the operation
changes exactly the jobs it counted, each through its transition with an event naming it, and
is audited once (on both engines, in batches of two so several transactions run)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select

from app.infra import db
from app.queue.contract.bulk import BulkApplied, BulkPreview, StaleCountProblem
from app.storage.schema import audit_events
from tests.api.conftest import assert_problem, event_rows, job_row, snapshot
from tests.builders import Api, make_api

REASON = "INC-7: the mail relay was down"


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"BULK_BATCH_SIZE": 2, "BULK_MAX_JOBS": 12}


def audit_rows(app: Flask) -> list[dict[str, Any]]:
    with app.app_context(), db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(select(audit_events).order_by("id"))]


def everything(app: Flask) -> tuple[Any, ...]:
    """Every job, event and audit row, to prove a request changed nothing."""
    return (*snapshot(app), audit_rows(app))


def seed(producer: Api, worker: Api) -> dict[str, int]:
    """One job in each state, plus a pending job of another type; name -> id."""
    ids = {}
    for name in ("completed", "failed", "running"):
        job = producer.enqueue(max_retries=0)
        held = worker.claim()
        assert held is not None and held["id"] == job["id"]
        ids[name] = job["id"]
        if name == "completed":
            assert worker.post(f"/jobs/{job['id']}/complete", {}).status_code == 200
        elif name == "failed":
            assert worker.post(f"/jobs/{job['id']}/fail", {"error": "no"}).status_code == 200
    ids["cancelled"] = producer.enqueue()["id"]
    assert producer.post(f"/jobs/{ids['cancelled']}/cancel").status_code == 200
    ids["pending"] = producer.enqueue(idempotency_key="order-9")["id"]
    ids["report"] = producer.enqueue("report.build")["id"]
    return ids


def bulk(admin: Api, action: str, flt: dict[str, Any], **extra: Any) -> Any:
    return admin.post("/jobs/bulk", {"action": action, "filter": flt, "reason": REASON, **extra})


@pytest.mark.parametrize(
    ("action", "flt", "selected"),
    [
        ("cancel", {}, ["report", "pending", "running"]),
        ("cancel", {"type": "email.send"}, ["pending", "running"]),
        ("cancel", {"status": "completed"}, []),
        ("cancel", {"q": "order-9"}, ["pending"]),
        ("retry", {}, ["cancelled", "failed"]),
        ("retry", {"status": "failed", "priority": "low"}, ["failed"]),
        ("retry", {"priority": "high"}, []),
        ("delete", {}, ["cancelled", "failed", "completed"]),
    ],
)
def test_preview_counts_what_the_action_applies_to_and_changes_nothing(
    app: Flask, producer: Api, worker: Api, admin: Api, action: str, flt: Any, selected: Any
) -> None:
    ids = seed(producer, worker)
    before = everything(app)
    response = bulk(admin, action, flt)
    assert response.status_code == 200, response.get_json()
    preview = BulkPreview.model_validate(response.get_json())
    assert preview.count == len(selected)
    assert [job.id for job in preview.sample] == [ids[name] for name in selected]  # newest first
    assert everything(app) == before


def test_a_search_by_id_and_a_creation_window(producer: Api, worker: Api, admin: Api) -> None:
    ids = seed(producer, worker)
    assert bulk(admin, "delete", {"q": f" {ids['failed']} "}).get_json()["count"] == 1
    failed = admin.get(f"/jobs/{ids['failed']}").get_json()
    after = bulk(admin, "delete", {"created_after": failed["created_at"]}).get_json()
    assert [job["id"] for job in after["sample"]] == [ids["cancelled"]]  # strictly after
    before = bulk(admin, "delete", {"created_before": failed["created_at"]}).get_json()
    assert [job["id"] for job in before["sample"]] == [ids["completed"]]  # strictly before


def test_the_sample_is_the_newest_ten(producer: Api, admin: Api) -> None:
    jobs = [producer.enqueue()["id"] for _ in range(12)]
    preview = bulk(admin, "cancel", {}).get_json()
    assert preview["count"] == 12
    assert [job["id"] for job in preview["sample"]] == jobs[::-1][:10]


def test_a_stale_count_is_409_with_the_current_count_and_changes_nothing(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    seed(producer, worker)
    assert bulk(admin, "cancel", {}).get_json()["count"] == 3
    producer.enqueue()  # added after the preview
    before = everything(app)
    problem = assert_problem(bulk(admin, "cancel", {}, expect_count=3), 409)
    StaleCountProblem.model_validate(problem)
    assert problem["count"] == 4 and "4" in problem["detail"]
    assert everything(app) == before  # no job, event or audit row


def test_cancel_changes_exactly_the_counted_jobs_and_is_audited_once(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    ids = seed(producer, worker)
    extra = [producer.enqueue()["id"] for _ in range(2)]  # five selected: three batches of two
    outside = {name: job_row(app, ids[name]) for name in ("report", "completed", "failed")}
    response = bulk(admin, "cancel", {"type": "email.send"}, expect_count=4)
    assert response.status_code == 200, response.get_json()
    applied = BulkApplied.model_validate(response.get_json())
    assert applied.affected == 4
    for job_id in [ids["pending"], ids["running"], *extra]:
        assert job_row(app, job_id)["status"] == "cancelled"
        last = event_rows(app, job_id)[-1]
        assert (last["kind"], last["actor"]) == ("cancelled", "admin")
        assert last["note"] == f"bulk operation {applied.operation}: {REASON}"
    assert {name: job_row(app, ids[name]) for name in outside} == outside
    (row,) = [r for r in audit_rows(app) if r["action"] == "job_bulk"]
    assert (row["id"], row["actor"], row["target"]) == (applied.operation, "admin", "jobs:cancel")
    assert row["details"] == {"filter": {"type": "email.send"}, "reason": REASON, "count": 4}
    assert worker.post(f"/jobs/{ids['running']}/complete", {}).status_code == 409


def test_retry_puts_failed_and_cancelled_jobs_back(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    ids = seed(producer, worker)
    applied = bulk(admin, "retry", {}, expect_count=2).get_json()
    assert applied["affected"] == 2
    for name in ("failed", "cancelled"):
        job = admin.get(f"/jobs/{ids[name]}").get_json()
        assert (job["status"], job["retry_count"], job["finished_at"]) == ("pending", 0, None)
        last = event_rows(app, ids[name])[-1]
        assert (last["kind"], last["from_status"]) == ("retried", name)
        assert last["note"].startswith(f"bulk operation {applied['operation']}: ")
    assert job_row(app, ids["completed"])["status"] == "completed"


def test_delete_takes_finished_jobs_only(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    ids = seed(producer, worker)
    assert bulk(admin, "delete", {"status": "pending"}).get_json()["count"] == 0
    assert bulk(admin, "delete", {"status": "running"}, expect_count=0).get_json()["affected"] == 0
    applied = bulk(admin, "delete", {}, expect_count=3).get_json()
    assert applied["affected"] == 3
    for name in ("completed", "failed", "cancelled"):
        assert admin.get(f"/jobs/{ids[name]}").status_code == 404
        assert event_rows(app, ids[name]) == []  # gone with the job
    for name in ("pending", "running", "report"):
        assert admin.get(f"/jobs/{ids[name]}").status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "purge", "filter": {}, "reason": REASON}, "action"),
        ({"filter": {}, "reason": REASON}, "action"),
        ({"action": "cancel", "reason": REASON}, "filter"),
        ({"action": "cancel", "filter": [], "reason": REASON}, "filter"),
        ({"action": "cancel", "filter": {"state": "x"}, "reason": REASON}, "filter.state"),
        ({"action": "cancel", "filter": {"status": "done"}, "reason": REASON}, "filter.status"),
        ({"action": "cancel", "filter": {"priority": 3}, "reason": REASON}, "filter.priority"),
        ({"action": "cancel", "filter": {"type": 7}, "reason": REASON}, "filter.type"),
        (
            {"action": "cancel", "filter": {"created_before": "2026-01-01T00:00"}, "reason": "x"},
            "filter.created_before",
        ),
        (
            {"action": "cancel", "filter": {"created_after": "soon"}, "reason": "x"},
            "filter.created_after",
        ),
        ({"action": "cancel", "filter": {}}, "reason"),
        ({"action": "cancel", "filter": {}, "reason": ""}, "reason"),
        ({"action": "cancel", "filter": {}, "reason": " \t\u202e "}, "reason"),
        ({"action": "cancel", "filter": {}, "reason": "x" * 201}, "reason"),
        ({"action": "cancel", "filter": {}, "reason": 5}, "reason"),
        ({"action": "cancel", "filter": {}, "reason": "x", "expect_count": -1}, "expect_count"),
        ({"action": "cancel", "filter": {}, "reason": "x", "expect_count": "3"}, "expect_count"),
        ({"action": "cancel", "filter": {}, "reason": "x", "expect_count": True}, "expect_count"),
        ({"action": "cancel", "filter": {}, "reason": "x", "expect_count": 1.0}, "expect_count"),
        ({"action": "cancel", "filter": {}, "reason": "x", "dry_run": True}, "dry_run"),
    ],
)
def test_bad_input_is_422_per_field_and_changes_nothing(
    app: Flask, producer: Api, worker: Api, admin: Api, body: dict[str, Any], field: str
) -> None:
    seed(producer, worker)
    before = everything(app)
    problem = assert_problem(admin.post("/jobs/bulk", body), 422)
    assert field in problem["errors"], problem["errors"]
    assert everything(app) == before


def test_a_selection_over_bulk_max_jobs_is_refused(app: Flask, producer: Api, admin: Api) -> None:
    for _ in range(13):
        producer.enqueue()
    before = everything(app)
    for extra in ({}, {"expect_count": 13}):
        problem = assert_problem(bulk(admin, "cancel", {}, **extra), 422)
        assert "at most 12" in problem["errors"]["filter"]
    assert everything(app) == before


def test_the_reason_is_sanitized_where_people_read_it(
    app: Flask, producer: Api, admin: Api
) -> None:
    job = producer.enqueue()
    reason = "rotate password=hunter2 \x1b[31m<script>x</script>"
    response = bulk(admin, "cancel", {}, expect_count=1, reason=reason)
    assert response.status_code == 200, response.get_json()
    note = event_rows(app, job["id"])[-1]["note"]
    assert "hunter2" not in note and "\x1b" not in note and "<script>x</script>" in note
    assert "hunter2" not in str(audit_rows(app)[-1]["details"])


def test_role_matrix(
    app: Flask, client: FlaskClient, anonymous: Api, producer: Api, worker: Api, admin: Api
) -> None:
    monitor = make_api(app, client, "prometheus", "monitor")
    producer.enqueue()
    before = everything(app)
    for caller, status in [
        (anonymous, 401),
        (Api(client, "ql_not-a-token"), 401),
        (producer, 403),
        (worker, 403),
        (monitor, 403),
    ]:
        for extra in ({}, {"expect_count": 1}):
            assert_problem(bulk(caller, "cancel", {}, **extra), status)
    assert everything(app) == before
    assert bulk(admin, "cancel", {}).status_code == 200
    assert_problem(admin.get("/jobs/bulk"), 405)  # a route of its own, not a job id
