"""GET /types and PATCH /types/{type}: effective limits (configuration merged with overrides),
refusals per field that change nothing, admins only, audited; and the explainer's flow
reasons as the API shows them."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text
from werkzeug.test import TestResponse

from app.infra import db
from app.queue.contract.control_responses import ExplanationOut, TypeList, TypeOut
from tests.api.conftest import assert_problem, snapshot
from tests.builders import Api

CONFIGURED = {"report.build": {"max_running": 4, "rate_limit": "100/minute", "lease_seconds": 60}}
NO_JOBS = {"pending": 0, "running": 0, "completed": 0, "failed": 0, "cancelled": 0}
NO_PARTITION_LIMITS = {"partition_max_running": None, "partition_rate_limit": None}


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"JOB_TYPE_SETTINGS": CONFIGURED}


def patch(api: Api, job_type: str, body: Any, **kw: Any) -> TestResponse:
    return api.client.patch(f"/types/{job_type}", json=body, headers=api.headers(), **kw)


def overrides(app: Flask) -> list[tuple[Any, ...]]:
    with db.read(app) as conn:
        return [tuple(r) for r in conn.execute(text("SELECT * FROM type_overrides ORDER BY type"))]


def test_types_list_every_configured_type_with_counts_and_effective_limits(
    admin: Api, producer: Api, worker: Api
) -> None:
    producer.enqueue("report.build")
    producer.enqueue("report.build")
    producer.enqueue("email.send")
    assert worker.claim(types=["report.build"]) is not None
    body = admin.get("/types").get_json()
    TypeList.model_validate(body)
    assert body == {
        "types": [
            {"type": "email.send", "counts": NO_JOBS | {"pending": 1}}
            | {"max_running": None, "rate_limit": None, "paused": False, "max_run_seconds": None}
            | NO_PARTITION_LIMITS,
            {"type": "report.build", "counts": NO_JOBS | {"pending": 1, "running": 1}}
            | {"max_running": 4, "rate_limit": "100/minute", "paused": False}
            | {"max_run_seconds": None}
            | NO_PARTITION_LIMITS,
            {"type": "webhook.deliver", "counts": NO_JOBS}
            | {"max_running": None, "rate_limit": None, "paused": False, "max_run_seconds": None}
            | NO_PARTITION_LIMITS,
        ]
    }


def test_patch_overrides_and_null_restores_the_configuration(admin: Api) -> None:
    changed = patch(admin, "report.build", {"max_running": 1, "paused": True})
    assert changed.status_code == 200, changed.get_json()
    TypeOut.model_validate(changed.get_json())
    assert changed.get_json() | {"counts": None} == {
        "type": "report.build", "counts": None,
        "max_running": 1, "rate_limit": "100/minute", "paused": True, "max_run_seconds": None,
    } | NO_PARTITION_LIMITS  # fmt: skip
    again = patch(admin, "report.build", {"rate_limit": "5/second"}).get_json()
    assert (again["max_running"], again["rate_limit"], again["paused"]) == (1, "5/second", True)
    cleared = patch(admin, "report.build", {"max_running": None, "paused": None}).get_json()
    assert (cleared["max_running"], cleared["paused"]) == (4, False)
    assert admin.get("/types").get_json()["types"][1] == cleared
    # an unlimited type gets a limit, and loses it again with null
    assert patch(admin, "email.send", {"max_running": 3}).get_json()["max_running"] == 3
    assert patch(admin, "email.send", {"max_running": None}).get_json()["max_running"] is None


def test_changes_are_audited_with_what_changed(admin: Api) -> None:
    patch(admin, "webhook.deliver", {"paused": True})
    patch(admin, "webhook.deliver", {"paused": False, "rate_limit": None})
    events = admin.get("/audit?action=type_change").get_json()["events"]
    assert [(e["actor"], e["target"], e["details"]) for e in events] == [
        ("admin", "type:webhook.deliver", {"paused": False, "rate_limit": None}),
        ("admin", "type:webhook.deliver", {"paused": True}),
    ]


MAX_RUNNING_RULE = "must be an integer from 1 to 1,000,000, or null"
MAX_RUN_RULE = "must be an integer from 1 to 31,536,000 (seconds), or null"
BAD_CHANGES = [
    ({"max_running": 0}, {"max_running": MAX_RUNNING_RULE}),
    ({"max_running": "3"}, {"max_running": MAX_RUNNING_RULE}),
    ({"max_running": True}, {"max_running": MAX_RUNNING_RULE}),
    ({"max_running": 10**7}, {"max_running": MAX_RUNNING_RULE}),
    ({"rate_limit": "10 per minute"}, {"rate_limit": "must be"}),
    ({"rate_limit": "0/second"}, {"rate_limit": "must be"}),
    ({"rate_limit": "5/day"}, {"rate_limit": "must be"}),
    ({"rate_limit": 5}, {"rate_limit": "must be"}),
    ({"paused": "yes"}, {"paused": "must be true or false"}),
    ({"max_run_seconds": 0}, {"max_run_seconds": MAX_RUN_RULE}),
    ({"max_run_seconds": -5}, {"max_run_seconds": MAX_RUN_RULE}),
    ({"max_run_seconds": 1.5}, {"max_run_seconds": MAX_RUN_RULE}),
    ({"max_run_seconds": "60"}, {"max_run_seconds": MAX_RUN_RULE}),
    ({"max_run_seconds": True}, {"max_run_seconds": MAX_RUN_RULE}),
    ({"max_run_seconds": 31_536_001}, {"max_run_seconds": MAX_RUN_RULE}),
    ({"paused": True, "lease_seconds": 5}, {"lease_seconds": "unknown field"}),
    ({}, {"body": "give at least one of max_running, rate_limit, paused"}),
]
MALFORMED = [
    (b"paused=true", "application/x-www-form-urlencoded", 415),
    (b'{"paused": true', "application/json", 400),
    (b"[]", "application/json", 400),
    (b'{"paused": true, "paused": false}', "application/json", 400),
    (b"", "application/json", 400),
]


def test_bad_changes_are_4xx_per_field_and_change_nothing(admin: Api, app: Flask) -> None:
    patch(admin, "email.send", {"max_running": 2})
    before = overrides(app), snapshot(app)
    for body, errors in BAD_CHANGES:
        problem = assert_problem(patch(admin, "email.send", body), 422)
        assert list(problem["errors"]) == list(errors), body
        for field, start in errors.items():
            assert problem["errors"][field].startswith(start), problem["errors"]
    for data, content_type, status in MALFORMED:
        response = admin.client.patch(
            "/types/email.send", data=data, content_type=content_type, headers=admin.headers()
        )
        assert_problem(response, status)
    for job_type in ("shell.exec", "email.sen", "Email.Send", "%00", "x" * 300):
        assert_problem(patch(admin, job_type, {"paused": True}), 404)
    assert (overrides(app), snapshot(app)) == before


def test_only_admins_see_or_change_types(
    producer: Api, worker: Api, anonymous: Api, app: Flask
) -> None:
    for caller, status in ((producer, 403), (worker, 403), (anonymous, 401)):
        assert_problem(caller.get("/types"), status)
        # refused before the body is read: even a malformed one gets the role's answer
        response = caller.client.patch(
            "/types/email.send", data=b"{oops", content_type="application/json",
            headers=caller.headers(),
        )  # fmt: skip
        assert_problem(response, status)
    assert overrides(app) == []


def explain(api: Api, job_id: int) -> dict[str, dict[str, Any]]:
    body = api.get(f"/jobs/{job_id}/explain").get_json()
    ExplanationOut.model_validate(body)
    return {reason["code"]: reason["figures"] for reason in body["reasons"]}


def test_a_paused_type_is_not_handed_out_and_the_job_says_why(
    admin: Api, producer: Api, worker: Api
) -> None:
    job = producer.enqueue("webhook.deliver")
    patch(admin, "webhook.deliver", {"paused": True})
    assert worker.claim() is None
    assert worker.claim(types=["webhook.deliver"], max_jobs=10) is None
    reasons = explain(producer, job["id"])
    assert reasons["type_paused"]["source"] == "override"
    assert reasons["type_paused"]["changed_by"] == "admin"
    assert "no_worker_polling" not in reasons  # nobody can claim it: no point blaming workers
    patch(admin, "webhook.deliver", {"paused": False})
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == job["id"]


def test_a_type_at_max_running_says_so(admin: Api, producer: Api, worker: Api) -> None:
    patch(admin, "report.build", {"max_running": 1})
    first, second = producer.enqueue("report.build"), producer.enqueue("report.build")
    assert worker.claim()["id"] == first["id"]  # type: ignore[index]
    assert worker.claim() is None
    reasons = explain(producer, second["id"])
    assert reasons["type_at_max_running"] == {
        "type": "report.build", "max_running": 1, "running": 1,
    }  # fmt: skip
    assert reasons["behind_in_queue"]["ahead"] == 0


def test_every_api_route_is_under_an_api_root(app: Flask) -> None:
    """A route the list of API roots misses gets the page session and the page Origin check."""
    from app.infra.security import is_api_path

    for rule in app.url_map.iter_rules():
        if rule.endpoint.split(".")[0] == "api":
            assert is_api_path(rule.rule.split("<")[0].rstrip("/") or "/"), rule.rule


def test_patch_types_with_an_origin_header_is_a_bearer_call_without_a_session(admin: Api) -> None:
    origin = {"Origin": "https://elsewhere.example"}
    changed = admin.client.patch(
        "/types/report.build", json={"paused": True}, headers=admin.headers(origin)
    )
    assert changed.status_code == 200, changed.data[:200]
    assert changed.get_json()["paused"] is True
    assert "Set-Cookie" not in changed.headers
    assert "Cookie" not in changed.headers.get("Vary", "")
