"""The schedules' JSON routes and GET /jobs/{id}/explain: shapes, roles, refusals per field,
and the tick a claim makes on its way."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text
from werkzeug.test import TestResponse

from app.accounts import service as accounts
from app.audit.actions import Origin
from app.infra import db, housekeeper
from app.infra.housekeeper import Housekeeper
from app.infra.queue_settings import queue_settings
from app.queue.contract.schedules import ScheduleCreate, parse
from app.queue.usecases import schedules
from app.queue.vocabulary.timeutil import utcnow
from tests.api.conftest import assert_problem, snapshot
from tests.builders import Api

ISO_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
NIGHTLY = {"name": "nightly report", "cron": "0 2 * * *", "type": "report.build"}


def send(api: Api, method: str, path: str, body: Any = None, **kw: Any) -> TestResponse:
    return api.client.open(path, method=method, json=body, headers=api.headers(), **kw)


def schedule_rows(app: Flask) -> list[tuple[Any, ...]]:
    with db.read(app) as conn:
        return [tuple(r) for r in conn.execute(text("SELECT * FROM schedules ORDER BY id"))]


def test_create_read_change_delete(admin: Api) -> None:
    created = admin.post("/schedules", NIGHTLY | {"timezone": "Europe/Paris", "priority": "high"})
    assert created.status_code == 201, created.get_json()
    body = created.get_json()
    assert created.headers["Location"] == f"/schedules/{body['id']}"
    assert list(body) == [
        "id", "name", "cron", "description", "timezone", "type", "payload", "priority",
        "enabled", "catch_up", "next_runs", "last_run_at", "created_at", "updated_at",
        "partition",
    ]  # fmt: skip
    assert (body["payload"], body["enabled"], body["catch_up"]) == ({}, True, "skip")
    assert body["description"] == "At 02:00 every day" and body["last_run_at"] is None
    assert len(body["next_runs"]) == 5 and all(ISO_Z.fullmatch(t) for t in body["next_runs"])
    assert all(t.endswith(("T01:00:00.000000Z", "T00:00:00.000000Z")) for t in body["next_runs"])
    assert admin.get(f"/schedules/{body['id']}").get_json() == body
    assert admin.get("/schedules").get_json() == {"schedules": [body]}

    changed = send(admin, "PATCH", f"/schedules/{body['id']}", {"enabled": False})
    assert changed.status_code == 200
    assert (changed.get_json()["enabled"], changed.get_json()["next_runs"]) == (False, [])
    assert send(admin, "DELETE", f"/schedules/{body['id']}").status_code == 204
    assert_problem(admin.get(f"/schedules/{body['id']}"), 404)
    assert_problem(send(admin, "DELETE", f"/schedules/{body['id']}"), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/schedules/999"),
        ("PATCH", "/schedules/999"),
        ("DELETE", "/schedules/999"),
        ("POST", "/schedules/999/run"),
        ("GET", "/schedules/1234567890123456789012"),
        ("GET", "/schedules/-1"),
    ],
)
def test_unknown_schedules_are_404(admin: Api, method: str, path: str) -> None:
    assert_problem(send(admin, method, path, {"enabled": True} if method == "PATCH" else None), 404)


def test_duplicate_names_are_409(admin: Api, app: Flask) -> None:
    first = admin.post("/schedules", NIGHTLY).get_json()
    other = admin.post("/schedules", NIGHTLY | {"name": "other"}).get_json()
    before = schedule_rows(app)
    problem = assert_problem(admin.post("/schedules", NIGHTLY), 409)
    assert "already exists" in problem["detail"]
    assert_problem(send(admin, "PATCH", f"/schedules/{other['id']}", {"name": first["name"]}), 409)
    assert schedule_rows(app) == before


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "@daily"}, "cron"),
        ({"cron": 5}, "cron"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"timezone": "../../../etc/passwd"}, "timezone"),
        ({"timezone": None}, "timezone"),
        ({"type": "shell.exec"}, "type"),
        ({"name": ""}, "name"),
        ({"name": "<script>"}, "name"),
        ({"payload": "{}"}, "payload"),
        ({"payload": {"k": "\ud800"}}, "payload"),
        ({"priority": "urgent"}, "priority"),
        ({"enabled": 1}, "enabled"),
        ({"catch_up": "all"}, "catch_up"),
        ({"next_run_at": "2030-01-01T00:00:00Z"}, "next_run_at"),
        ({"created_by": 1}, "created_by"),
    ],
)
def test_bad_fields_are_422_per_field_and_change_nothing(
    admin: Api, app: Flask, fields: dict[str, Any], field: str
) -> None:
    existing = admin.post("/schedules", NIGHTLY).get_json()
    before = schedule_rows(app)
    problem = assert_problem(admin.post("/schedules", NIGHTLY | {"name": "new"} | fields), 422)
    assert list(problem["errors"]) == [field]
    problem = assert_problem(send(admin, "PATCH", f"/schedules/{existing['id']}", fields), 422)
    assert list(problem["errors"]) == [field]
    assert schedule_rows(app) == before


def test_missing_fields_are_named(admin: Api) -> None:
    problem = assert_problem(admin.post("/schedules", {}), 422)
    assert problem["errors"] == {
        "name": "is required",
        "cron": "is required",
        "type": "is required",
    }


@pytest.mark.parametrize(
    ("data", "content_type", "status"),
    [
        (b"name=x", "application/x-www-form-urlencoded", 415),
        (b'{"name": "x"', "application/json", 400),
        (b"[]", "application/json", 400),
        (b'{"name": "a", "name": "b"}', "application/json", 400),
        (b'{"name": NaN}', "application/json", 400),
        (b"\xff\xfe", "application/json", 400),
        (b"[" * 100 + b"]" * 100, "application/json", 400),
    ],
)
def test_malformed_bodies_are_4xx_never_500(
    admin: Api, app: Flask, data: bytes, content_type: str, status: int
) -> None:
    existing = admin.post("/schedules", NIGHTLY).get_json()
    for method, path in (("POST", "/schedules"), ("PATCH", f"/schedules/{existing['id']}")):
        response = admin.client.open(
            path, method=method, data=data, content_type=content_type, headers=admin.headers()
        )
        assert_problem(response, status)
    assert len(schedule_rows(app)) == 1


def test_only_admins_manage_schedules(
    admin: Api, producer: Api, worker: Api, anonymous: Api, app: Flask
) -> None:
    sid = admin.post("/schedules", NIGHTLY).get_json()["id"]
    before = snapshot(app), schedule_rows(app)
    routes = [
        ("GET", "/schedules"),
        ("POST", "/schedules"),
        ("GET", f"/schedules/{sid}"),
        ("PATCH", f"/schedules/{sid}"),
        ("DELETE", f"/schedules/{sid}"),
        ("POST", f"/schedules/{sid}/run"),
    ]
    for caller, status in ((producer, 403), (worker, 403), (anonymous, 401)):
        for method, path in routes:
            # refused before the body is read: even a malformed one gets the role's answer
            response = caller.client.open(
                path, method=method, data=b"{oops", content_type="application/json",
                headers=caller.headers(),
            )  # fmt: skip
            assert_problem(response, status)
    assert (snapshot(app), schedule_rows(app)) == before


def test_run_now_enqueues_one_job(admin: Api, producer: Api, app: Flask) -> None:
    sid = admin.post("/schedules", NIGHTLY | {"payload": {"day": "today"}}).get_json()["id"]
    response = admin.post(f"/schedules/{sid}/run")
    assert response.status_code == 201
    job = response.get_json()
    assert response.headers["Location"] == f"/jobs/{job['id']}"
    assert (job["type"], job["payload"], job["status"]) == (
        "report.build",
        {"day": "today"},
        "pending",
    )
    events = admin.get(f"/jobs/{job['id']}/events").get_json()["events"]
    assert [(e["kind"], e["actor"]) for e in events] == [("enqueued", "schedule:nightly report")]
    assert admin.get(f"/schedules/{sid}").get_json()["last_run_at"] == job["created_at"]
    assert_problem(admin.post(f"/schedules/{sid}/run", {"force": True}), 422)
    assert_problem(producer.get(f"/jobs/{job['id']}"), 404)  # the admin's job, not the producer's


def test_the_housekeeper_fires_a_due_schedule_for_a_waiting_claim(
    admin: Api, worker: Api, app: Flask
) -> None:
    """The schedule's slot passed a minute ago; the process's housekeeping thread enqueues its
    job, and a claim waiting meanwhile takes it: no request had to run the tick."""
    with app.app_context(), db.transaction() as conn:
        request = parse(
            ScheduleCreate,
            {"name": "minutely", "cron": "* * * * *", "type": "webhook.deliver"},
            queue_settings(),
        )
        actor = accounts.get_user(conn, accounts.OPERATOR, "admin").actor()
        schedules.create(
            conn, actor, request, now=utcnow() - timedelta(seconds=61), origin=Origin(actor.name)
        )
    keeper = Housekeeper(housekeeper.housekeeping(app), tick=0.05, retention_every=3600)
    keeper.start()
    try:
        claimed = worker.claim(wait_seconds=10)
    finally:
        keeper.stop()
    assert claimed is not None and claimed["type"] == "webhook.deliver"
    assert worker.claim() is None  # one job for the slot, not one per tick
    listed = admin.get("/schedules").get_json()["schedules"][0]
    assert listed["last_run_at"] is not None


def test_explain_route(producer: Api, other_producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue(run_at="2099-01-01T00:00:00Z")
    body = producer.get(f"/jobs/{job['id']}/explain").get_json()
    assert body["status"] == "pending"
    assert [r["code"] for r in body["reasons"]] == ["scheduled"]
    assert set(body["reasons"][0]) == {"code", "detail", "figures"}
    assert admin.get(f"/jobs/{job['id']}/explain").status_code == 200
    for stranger in (other_producer, worker):
        assert_problem(stranger.get(f"/jobs/{job['id']}/explain"), 404)
    assert_problem(admin.get("/jobs/999999/explain"), 404)
    assert_problem(Api(producer.client, None).get(f"/jobs/{job['id']}/explain"), 401)
