"""The audit log: every audited action is recorded once, with actor, action and target, in the
transaction of the action; nothing but `audit prune` removes or changes a row."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskCliRunner
from sqlalchemy import select, text

from app.audit import store as audit_store
from app.audit.actions import AuditAction, Origin
from app.cli.commands import operator_origin
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import audit_events
from tests.builders import PASSWORD
from tests.web.conftest import Team, login, sign_in

Row = dict[str, Any]


def audit_rows(app: Flask) -> list[Row]:
    with app.app_context(), db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(select(audit_events).order_by("id"))]


def recorded(app: Flask, act: Callable[[], Any]) -> list[Row]:
    """The audit rows ``act`` appended."""
    before = len(audit_rows(app))
    act()
    return audit_rows(app)[before:]


def one(rows: list[Row], actor: str, action: AuditAction, target: str) -> Row:
    """Exactly one row, and it is this one."""
    assert [(r["actor"], r["action"], r["target"]) for r in rows] == [(actor, action.value, target)]
    return rows[0]


def test_sign_in_success_failure_and_sign_out(team: Team) -> None:
    app = team.app
    client = app.test_client()
    rows = recorded(app, lambda: login(client, "prod", "wrong password!!"))
    one(rows, "anonymous", AuditAction.SIGN_IN_FAILED, "user:prod")
    assert rows[0]["client_address"] == "127.0.0.1"
    one(recorded(app, lambda: login(client, "prod")), "prod", AuditAction.SIGN_IN, "user:prod")
    person = sign_in(app, "boss")
    rows = recorded(app, lambda: person.post("/logout"))
    one(rows, "boss", AuditAction.SIGN_OUT, "user:boss")


def test_user_and_token_changes_on_the_admin_pages(team: Team) -> None:
    app = team.app
    boss = sign_in(app, "boss")
    rows = recorded(
        app,
        lambda: boss.post(
            "/ui/admin/users",
            {"name": "newbie", "role": "worker", "max_priority": "low", "password": ""},
        ),
    )
    assert one(rows, "boss", AuditAction.USER_CREATE, "user:newbie")["details"] == {
        "role": "worker"
    }
    with app.app_context(), db.read() as conn:
        uid = conn.execute(text("SELECT id FROM users WHERE name = 'newbie'")).scalar_one()
    rows = recorded(
        app,
        lambda: boss.post(
            "/ui/admin/users/newbie/update",
            {f"u{uid}-role": "monitor", f"u{uid}-max_priority": "high"},
        ),
    )
    row = one(rows, "boss", AuditAction.USER_UPDATE, "user:newbie")
    assert row["details"] == {"role": "monitor", "max_priority": "high"}
    rows = recorded(app, lambda: boss.post("/ui/admin/users/newbie/disable"))
    one(rows, "boss", AuditAction.USER_DISABLE, "user:newbie")
    rows = recorded(app, lambda: boss.post("/ui/admin/users/newbie/enable"))
    one(rows, "boss", AuditAction.USER_ENABLE, "user:newbie")
    rows = recorded(app, lambda: boss.post("/ui/admin/tokens", {"user": "newbie", "label": "x"}))
    token_id = int(one(rows, "boss", AuditAction.TOKEN_ISSUE, rows[0]["target"])["target"][6:])
    assert rows[0]["details"] == {"user": "newbie"}
    rows = recorded(app, lambda: boss.post(f"/ui/admin/tokens/{token_id}/revoke"))
    one(rows, "boss", AuditAction.TOKEN_REVOKE, f"token:{token_id}")


def test_cli_changes_are_audited_as_the_operator(app: Flask, runner: FlaskCliRunner) -> None:
    actor = operator_origin().actor
    assert actor.startswith("cli")

    def run(*args: str, stdin: str | None = None) -> None:
        result = runner.invoke(args=list(args), input=stdin)
        assert result.exit_code == 0, result.output

    rows = recorded(app, lambda: run("user", "create", "ops", "--role", "monitor"))
    one(rows, actor, AuditAction.USER_CREATE, "user:ops")
    assert rows[0]["client_address"] is None
    rows = recorded(app, lambda: run("user", "set-password", "ops", stdin=PASSWORD + "\n"))
    one(rows, actor, AuditAction.USER_PASSWORD, "user:ops")
    one(
        recorded(app, lambda: run("user", "disable", "ops")),
        actor,
        AuditAction.USER_DISABLE,
        "user:ops",
    )
    one(
        recorded(app, lambda: run("user", "enable", "ops")),
        actor,
        AuditAction.USER_ENABLE,
        "user:ops",
    )
    rows = recorded(app, lambda: run("token", "create", "ops"))
    target = one(rows, actor, AuditAction.TOKEN_ISSUE, rows[0]["target"])["target"]
    rows = recorded(app, lambda: run("token", "revoke", target.removeprefix("token:")))
    one(rows, actor, AuditAction.TOKEN_REVOKE, target)


def test_job_cancel_and_retry_through_the_api_and_the_pages(team: Team) -> None:
    app = team.app
    first, second = team.producer.enqueue(), team.producer.enqueue()
    rows = recorded(app, lambda: team.producer.post(f"/jobs/{first['id']}/cancel"))
    one(rows, "prod", AuditAction.JOB_CANCEL, f"job:{first['id']}")
    rows = recorded(app, lambda: team.admin.post(f"/jobs/{first['id']}/retry"))
    one(rows, "boss", AuditAction.JOB_RETRY, f"job:{first['id']}")
    boss = sign_in(app, "boss")
    rows = recorded(app, lambda: boss.post(f"/ui/jobs/{second['id']}/cancel"))
    one(rows, "boss", AuditAction.JOB_CANCEL, f"job:{second['id']}")
    rows = recorded(app, lambda: boss.hx_post(f"/ui/jobs/{second['id']}/retry"))
    one(rows, "boss", AuditAction.JOB_RETRY, f"job:{second['id']}")


def test_schedule_changes_through_the_api_and_the_pages(team: Team) -> None:
    app, api = team.app, team.admin
    nightly = {"name": "nightly", "cron": "0 2 * * *", "type": "report.build"}
    rows = recorded(app, lambda: api.post("/schedules", nightly))
    schedule = f"schedule:{rows[0]['target'].split(':')[1]}"
    assert one(rows, "boss", AuditAction.SCHEDULE_CHANGE, schedule)["details"] == {
        "change": "create"
    }
    path = f"/schedules/{schedule.split(':')[1]}"
    change = {"cron": "0 3 * * *", "enabled": False}
    rows = recorded(app, lambda: api.client.patch(path, json=change, headers=api.headers()))
    assert one(rows, "boss", AuditAction.SCHEDULE_CHANGE, schedule)["details"] == {
        "change": "update",
        "fields": ["cron", "enabled"],
    }
    # The switch alone is recorded as the pages record it, whichever front end flips it.
    switch = {"enabled": True}
    rows = recorded(app, lambda: api.client.patch(path, json=switch, headers=api.headers()))
    assert one(rows, "boss", AuditAction.SCHEDULE_CHANGE, schedule)["details"] == {
        "change": "enable"
    }
    rows = recorded(app, lambda: api.post(f"{path}/run"))
    job = api.get("/jobs?limit=1").get_json()["jobs"][0]["id"]
    assert one(rows, "boss", AuditAction.SCHEDULE_CHANGE, schedule)["details"] == {
        "change": "run",
        "job": job,
    }
    boss = sign_in(app, "boss")
    for change in ("enable", "disable", "run", "delete"):
        rows = recorded(app, lambda change=change: boss.post(f"/ui{path}/{change}"))
        assert one(rows, "boss", AuditAction.SCHEDULE_CHANGE, schedule)["details"]["change"] == (
            change
        )
    assert recorded(app, lambda: boss.post(f"/ui{path}/delete")) == []  # gone: 404, no row
    form = nightly | {"timezone": "UTC", "priority": "low", "payload": "{}", "catch_up": "skip"}
    rows = recorded(app, lambda: boss.post("/ui/schedules/", form))
    assert [(r["action"], r["details"]) for r in rows] == [
        ("schedule_change", {"change": "create"})
    ]


def test_refused_actions_leave_no_audit_row(team: Team) -> None:
    app = team.app
    job = team.producer.enqueue()
    team.producer.post(f"/jobs/{job['id']}/cancel")
    assert recorded(app, lambda: team.producer.post(f"/jobs/{job['id']}/cancel")) == []  # 409
    assert recorded(app, lambda: team.producer.post(f"/jobs/{job['id']}/retry")) == []  # 403
    boss = sign_in(app, "boss")
    assert recorded(app, lambda: boss.post("/ui/admin/users/boss/disable")) == []  # 409


def test_a_failed_transaction_leaves_no_audit_row(app: Flask) -> None:
    with app.app_context(), pytest.raises(RuntimeError), db.transaction() as conn:
        audit_store.record(conn, Origin("boss"), AuditAction.JOB_CANCEL, "job:1", at=utcnow())
        raise RuntimeError("the action failed after the audit row was written")
    assert audit_rows(app) == []


def test_no_route_changes_or_removes_audit_rows(team: Team) -> None:
    """Every route, called by an admin with and without a body, only ever appends."""
    app = team.app
    boss = sign_in(app, "boss")
    team.producer.enqueue()
    before = audit_rows(app)
    assert before
    for rule in app.url_map.iter_rules():
        if rule.endpoint in ("static", "web.auth.logout"):  # a file; signing out is audited above
            continue
        path = rule.rule.replace("<id:job_id>", "1").replace("<id:token_id>", "1")
        path = path.replace("<name>", "prod")
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            if method == "GET":
                boss.get(path).close()
            else:
                boss.post(path, method=method).close()
            api_body = {} if method != "GET" else None
            team.admin.client.open(
                path, method=method, headers=team.admin.headers(), json=api_body
            ).close()
            after = audit_rows(app)
            assert after[: len(before)] == before, (method, rule.rule)
            before = after


def test_audit_rows_are_written_only_by_append_and_removed_only_by_prune() -> None:
    """A source check: no other statement in the app names the table."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "app"
    users = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "audit_events" in path.read_text() and "migrations" not in path.parts
    }
    # Retention (AUDIT_RETENTION) prunes them; the rest only name the table in words.
    assert users == {
        "storage/schema.py", "audit/store.py", "queue/sql/retention.py",
        "queue/rules/retention.py", "queue/usecases/housekeeping.py", "cli/commands.py",
    }  # fmt: skip
    store = (root / "audit" / "store.py").read_text()
    assert store.count("update(") == 0 and store.count("delete(audit_events)") == 1


def test_client_address_comes_from_the_trusted_proxy(database_url: str) -> None:
    from app import create_app
    from tests.builders import make_api
    from tests.conftest import base_config

    app = create_app(base_config(database_url, TRUSTED_PROXIES=1))
    try:
        producer = make_api(app, app.test_client(), "prod", "producer")
        job = producer.enqueue()
        forwarded = {"X-Forwarded-For": "203.0.113.9"}
        rows = recorded(app, lambda: producer.post(f"/jobs/{job['id']}/cancel", headers=forwarded))
        assert one(rows, "prod", AuditAction.JOB_CANCEL, f"job:{job['id']}")["client_address"] == (
            "203.0.113.9"
        )
    finally:
        db.close(app)
