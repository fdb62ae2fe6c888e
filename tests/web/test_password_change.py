"""Self-service password change: the current password is required, the new one follows the
usual rules, the user's other sessions end and this one continues."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select
from werkzeug.test import TestResponse

from app.accounts import service as accounts
from app.audit.actions import AuditAction
from app.infra import db
from app.storage.schema import audit_events
from tests.builders import PASSWORD
from tests.web.conftest import Team, login

NEW_PASSWORD = "a much longer new passphrase"


def test_password_change_needs_current_password_and_ends_other_sessions(team: Team) -> None:
    here = team.person("prod")
    elsewhere = team.person("prod")
    page = here.get("/ui/account/password")
    assert page.status_code == 200 and 'autocomplete="new-password"' in page.get_data(as_text=True)
    wrong = here.post(
        "/ui/account/password", {"current_password": "not it at all!", "new_password": NEW_PASSWORD}
    )
    assert wrong.status_code == 422 and "is not your password" in wrong.get_data(as_text=True)
    short = here.post("/ui/account/password", {"current_password": PASSWORD, "new_password": "x"})
    assert short.status_code == 422 and "12 to 1024" in short.get_data(as_text=True)
    assert elsewhere.get("/ui/").status_code == 200  # nothing changed yet
    done = here.post(
        "/ui/account/password", {"current_password": PASSWORD, "new_password": NEW_PASSWORD}
    )
    assert done.status_code == 302
    assert here.get("/ui/").status_code == 200  # this session continues
    assert elsewhere.get("/ui/").status_code == 302  # the other one ended
    client = team.app.test_client()
    assert login(client, "prod").status_code == 401
    assert login(client, "prod", NEW_PASSWORD).status_code == 302


def test_password_change_page_needs_sign_in_and_csrf(team: Team) -> None:
    client = team.app.test_client()
    assert client.get("/ui/account/password").status_code == 302
    here = team.person("prod")
    form = {"current_password": PASSWORD, "new_password": NEW_PASSWORD}
    assert here.client.post("/ui/account/password", data=form).status_code == 400


def _change(person: Any, current: str, address: str = "127.0.0.1") -> TestResponse:
    form = {"current_password": current, "new_password": NEW_PASSWORD, "csrf_token": person.csrf}
    return person.client.post(
        "/ui/account/password", data=form, environ_base={"REMOTE_ADDR": address}
    )


def _audit(app: Flask) -> list[tuple[str, str, str | None]]:
    with db.read(app) as conn:
        rows = conn.execute(select(audit_events).order_by(audit_events.c.id)).mappings().all()
    return [(r["actor"], r["action"], r["target"]) for r in rows if "password" in r["action"]]


def test_password_guesses_hit_the_sign_in_limits_and_are_audited(team: Team) -> None:
    """A stolen session guesses no faster than a stranger: the per-address limit (10 per
    minute by default) refuses the 11th guess unchecked, and the right password with it."""
    thief = team.person("prod")
    answers = [_change(thief, f"guess number {n}!").status_code for n in range(12)]
    assert answers == [422] * 10 + [429] * 2
    refused = _change(thief, PASSWORD)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    with db.read(team.app) as conn:  # unchanged (a sign-in from here would be refused now)
        assert accounts.authenticate_password(conn, "prod", PASSWORD) is not None
    failed = ("prod", AuditAction.PASSWORD_CHANGE_FAILED.value, "user:prod")
    assert _audit(team.app) == [failed] * 10


class TestPerAccountLimit:
    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"LOGIN_RATE_LIMIT": "100 per minute", "LOGIN_ACCOUNT_RATE_LIMIT": "3 per minute"}

    def test_guesses_from_many_addresses_share_the_account_limit(self, team: Team) -> None:
        thief = team.person("prod")
        answers = [_change(thief, "guess!!!!!!!!", f"10.0.0.{n}").status_code for n in range(4)]
        assert answers == [422, 422, 422, 429]
        # The same counter as signing in: the account's sign-in is refused too.
        assert login(team.app.test_client(), "prod").status_code == 429

    def test_a_success_is_audited_and_gives_its_attempt_back(self, team: Team) -> None:
        here = team.person("prod")
        assert _change(here, "guess!!!!!!!!").status_code == 422
        assert _change(here, PASSWORD).status_code == 302
        assert _audit(team.app) == [
            ("prod", AuditAction.PASSWORD_CHANGE_FAILED.value, "user:prod"),
            ("prod", AuditAction.USER_PASSWORD.value, "user:prod"),
        ]
        client = team.app.test_client()
        assert login(client, "prod", "wrong password!!").status_code == 401  # 2 of 3 used
        assert login(client, "prod", NEW_PASSWORD).status_code == 302  # the 3rd
