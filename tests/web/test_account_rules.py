"""Account rules through the pages and the CLI: names regardless of case, the last admin,
fresh sign-in to take admin rights away, and tokens that expire."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskCliRunner

from app.accounts import service as accounts
from app.accounts.errors import AccountConflict, FreshLoginRequired
from app.audit.actions import Origin
from app.infra import db
from app.queue.vocabulary.timeutil import utcnow
from devservers.accounts import AS_OPERATOR
from tests.builders import PASSWORD, Api, make_user
from tests.web.conftest import Team, login, sign_in


def test_usernames_are_unique_regardless_of_case(app: Flask, runner: FlaskCliRunner) -> None:
    make_user(app, "admin", "admin", password=PASSWORD)
    boss = sign_in(app, "admin")
    response = boss.post("/ui/admin/users", {"name": "Admin", "role": "admin", "password": ""})
    assert response.status_code == 409
    assert "already exists" in response.get_data(as_text=True)
    result = runner.invoke(args=["user", "create", "ADMIN", "--role", "producer"])
    assert result.exit_code != 0
    assert "already exists" in result.output
    assert [u.name for u in _users(app)] == ["admin"]
    # Sign-in ignores case too: the name can only mean one user.
    assert login(app.test_client(), "ADMIN").status_code == 302


def _users(app: Flask) -> list[accounts.User]:
    with app.app_context(), db.read() as conn:
        return accounts.list_users(conn, accounts.OPERATOR)


def test_last_enabled_admin_cannot_be_disabled_or_demoted(
    app: Flask, runner: FlaskCliRunner
) -> None:
    make_user(app, "root", "admin", password=PASSWORD)
    result = runner.invoke(args=["user", "disable", "root"])
    assert result.exit_code != 0
    assert "last enabled admin" in result.output
    root = sign_in(app, "root")
    demote = root.post(
        "/ui/admin/users/root/update", {"u1-role": "worker", "u1-max_priority": "low"}
    )
    assert demote.status_code == 409
    assert "last enabled admin" in demote.get_data(as_text=True)
    assert [(u.role, u.disabled) for u in _users(app)] == [("admin", False)]
    make_user(app, "second", "admin", password=PASSWORD)
    assert runner.invoke(args=["user", "disable", "root"]).exit_code == 0
    with app.app_context(), db.transaction() as conn, pytest.raises(AccountConflict):
        accounts.update_user(
            conn,
            accounts.OPERATOR,
            "second",
            role="producer",
            max_priority="low",
            now=utcnow(),
            origin=AS_OPERATOR,
        )


def test_disabling_another_admin_needs_a_fresh_login(app: Flask, team: Team) -> None:
    make_user(app, "boss2", "admin", password=PASSWORD)
    boss = team.person("boss")
    app.config["FRESH_LOGIN_SECONDS"] = 0  # the sign-in above is now too old
    stale = boss.post("/ui/admin/users/boss2/disable")
    assert stale.status_code == 302 and "/login" in stale.location
    assert not next(u for u in _users(app) if u.name == "boss2").disabled
    with app.app_context(), db.transaction() as conn, pytest.raises(FreshLoginRequired):
        accounts.set_disabled(
            conn,
            team_actor(app, "boss"),
            "boss2",
            disabled=True,
            now=utcnow(),
            origin=Origin(team_actor(app, "boss").name),
        )
    app.config["FRESH_LOGIN_SECONDS"] = 600
    assert boss.post("/ui/admin/users/boss2/disable").status_code == 302
    assert next(u for u in _users(app) if u.name == "boss2").disabled


def team_actor(app: Flask, name: str) -> accounts.Actor:
    with app.app_context(), db.read() as conn:
        return accounts.get_user(conn, accounts.OPERATOR, name).actor()


def test_expired_tokens_answer_401(app: Flask, team: Team, runner: FlaskCliRunner) -> None:
    with app.app_context(), db.transaction() as conn:
        _, raw = accounts.create_token(
            conn,
            accounts.OPERATOR,
            "work",
            now=utcnow() - timedelta(hours=2),
            expires_in=timedelta(hours=1),
            origin=AS_OPERATOR,
        )
    response = Api(app.test_client(), raw).post("/jobs/claim")
    assert response.status_code == 401
    created = runner.invoke(args=["token", "create", "work", "--expires-in", "90d"])
    assert created.exit_code == 0, created.output
    fresh = Api(app.test_client(), created.output.splitlines()[-1])
    assert fresh.post("/jobs/claim").status_code == 204
    listing = runner.invoke(args=["token", "list", "work"]).output.splitlines()
    in_90_days = (utcnow() + timedelta(days=90)).date().isoformat()
    assert in_90_days in listing[0] and "\tactive\t" in listing[0]
    assert "\texpired\t" in listing[1]
    assert runner.invoke(args=["token", "create", "work", "--expires-in", "soon"]).exit_code


def test_tokens_page_offers_lifetimes_and_shows_expiry_and_last_use(app: Flask, team: Team) -> None:
    boss = team.person("boss")
    page = boss.get("/ui/admin/tokens").get_data(as_text=True)
    assert "Expires after" in page and "never (until revoked)" in page
    issued = boss.post("/ui/admin/tokens", {"user": "prod", "label": "ci", "expires_in": "7 days"})
    assert issued.status_code == 201
    team.producer.get("/jobs")  # a use is recorded
    page = boss.get("/ui/admin/tokens").get_data(as_text=True)
    in_7_days = (utcnow() + timedelta(days=7)).date().isoformat()
    assert in_7_days in page
    assert '<th scope="col">Last used</th>' in page
    assert (
        boss.post("/ui/admin/tokens", {"user": "prod", "expires_in": "forever"}).status_code == 422
    )
