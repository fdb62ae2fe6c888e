"""Every route declares, next to it, the policy action it needs (or that it is public), and a
request asks the policy once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask

from app.infra import access
from app.queue.rules import policy
from app.queue.rules.policy import Action
from tests.builders import Api

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
    assert declared["api.retry"] == Action.RETRY and declared["web.admin.users"] == "manage_users"


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
