"""Every route declares, next to it, the policy action it needs (or that it is public); the door
asks the policy once per request, and refuses what a role may not do on every route."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select

from app.infra import access, db
from app.queue.rules import policy
from app.queue.rules.policy import Action
from app.queue.vocabulary.states import Role
from app.storage.schema import (
    api_tokens,
    audit_events,
    job_dependencies,
    job_events,
    job_groups,
    jobs,
    schedules,
    users,
)
from app.storage.schema_types import type_overrides, type_polls
from tests.builders import PASSWORD, Api, make_api
from tests.web.conftest import csrf_token, login

# Routes outside the policy by nature: Flask's static files and signing in and out.
OUTSIDE_THE_POLICY = {"static", "web.auth.login", "web.auth.logout"}


def test_every_route_declares_its_action(app: Flask) -> None:
    undeclared, declared = [], {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint in OUTSIDE_THE_POLICY:
            continue
        action = access.declared(app.view_functions[rule.endpoint])
        if action is None:
            undeclared.append(rule.rule)
        else:
            declared[rule.endpoint] = action
    assert undeclared == []
    markers = {access.PUBLIC, access.SIGNED_IN}
    assert set(declared.values()) <= set(Action) | markers, declared
    assert len(declared) >= 20, declared
    assert declared["api.jobs.retry"] == Action.RETRY
    assert declared["web.admin.users"] == "manage_users"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every look at the role table during the test (a counting wrapper around the real one;
    whether the answer may show error texts shapes the output and is not counted)."""
    asked: list[str] = []
    real: Callable[..., bool] = policy.role_allows

    def counting(actor: Any, action: Action) -> bool:
        if action != Action.SEE_ERRORS:
            asked.append(str(action))
        return real(actor, action)

    monkeypatch.setattr(policy, "role_allows", counting)
    return asked


def test_a_request_asks_the_policy_once(
    producer: Api, worker: Api, admin: Api, counted: list[str]
) -> None:
    job = producer.enqueue()
    assert counted == ["enqueue"]
    for caller, path, body in [
        (worker, "/jobs/claim", None),
        (worker, f"/jobs/{job['id']}/heartbeat", {"progress": 5}),
        (worker, f"/jobs/{job['id']}/fail", {"error": "again", "retry_in": 0}),
        (worker, "/jobs/claim", None),
        (worker, f"/jobs/{job['id']}/fail", {"error": "again", "retryable": False}),
        (admin, f"/jobs/{job['id']}/retry", None),
        (producer, f"/jobs/{job['id']}/cancel", None),
        (admin, "/jobs/bulk", {"action": "retry", "filter": {}, "reason": "x", "expect_count": 1}),
    ]:
        counted.clear()
        response = caller.post(path, body)
        assert response.status_code == 200, (path, response.get_json())
        assert len(counted) == 1, (path, counted)


def test_spawning_children_and_waiting_ask_the_policy_once(
    producer: Api, worker: Api, counted: list[str]
) -> None:
    job = producer.enqueue()
    claimed = worker.claim()
    assert claimed is not None
    counted.clear()
    body = {"attempt": claimed["attempt"], "jobs": [{"type": "email.send"}]}
    assert worker.post(f"/jobs/{job['id']}/children", body).status_code == 201
    assert counted == ["spawn"]
    worker.post(f"/jobs/{job['id']}/complete", {"attempt": claimed["attempt"]})
    counted.clear()
    assert producer.get(f"/jobs/{job['id']}?wait_seconds=5").get_json()["status"] == "completed"
    assert counted == ["view_jobs"]


# Sample values for every route argument: the door answers before any of them is looked up.
_ARGUMENTS = {
    "job_id": 1,
    "token_id": 1,
    "schedule_id": 1,
    "group_id": 1,
    "name": "someone",
    "job_type": "email.send",
}
_TABLES = (
    jobs,
    job_events,
    job_dependencies,
    job_groups,
    type_polls,
    audit_events,
    schedules,
    type_overrides,
    users,
    api_tokens,
)


def _everything(app: Flask) -> dict[str, list[tuple[object, ...]]]:
    with app.app_context(), db.read() as conn:
        return {
            table.name: [tuple(row) for row in conn.execute(select(table).order_by(*table.c))]
            for table in _TABLES
        }


@pytest.mark.parametrize("role", [Role.PRODUCER, Role.WORKER, Role.MONITOR])
def test_every_route_refuses_at_the_door_what_the_role_may_not_do(
    app: Flask, client: FlaskClient, role: Role
) -> None:
    """Every route whose action the role table refuses to ``role`` answers 403, through the
    API (a bearer token and a body the route would refuse) and through the pages (a signed-in
    session with its CSRF token), and nothing changes: the door is the one place a request's
    role is asked, so it must stand in front of every route."""
    caller = make_api(app, client, f"door-{role}", role, password=PASSWORD)
    person = app.test_client()
    pages = role in policy.ROLES[Action.SIGN_IN]  # monitors are refused at signing in
    assert login(person, f"door-{role}").status_code == (302 if pages else 403)
    csrf = csrf_token(person.get("/login"))
    before = _everything(app)
    refused = []
    for rule in app.url_map.iter_rules():
        action = access.declared(app.view_functions[rule.endpoint])
        if action not in set(Action) or role in policy.ROLES[Action(action)]:
            continue
        if not (pages or rule.endpoint.startswith("api.")):
            continue
        path = rule.build({name: _ARGUMENTS[name] for name in rule.arguments})[1]
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            if rule.endpoint.startswith("api."):
                headers = caller.headers()
                response = client.open(path, method=method, headers=headers, json={"x": 1})
            else:
                response = person.open(path, method=method, data={"csrf_token": csrf})
            assert response.status_code == 403, (role, method, path, response.status_code)
            refused.append(rule.endpoint)
    assert len(refused) >= 20, refused
    assert _everything(app) == before
