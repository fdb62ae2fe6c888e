"""The optional second factor in the pages: enrolment with a QR code, sign-in with real codes,
replay refused, recovery codes, and REQUIRE_TOTP_FOR_ADMINS."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pyotp
import pytest
from flask import Flask
from sqlalchemy import func, select

from app.infra import db
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import audit_events
from tests.builders import PASSWORD
from tests.web.conftest import Person, Team, csrf_token, login, soup


def _enrol(person: Person) -> tuple[pyotp.TOTP, datetime, list[str]]:
    page = person.get("/ui/account/second-factor")
    assert page.status_code == 200
    image = soup(page).find("img")
    assert image is not None and str(image["src"]).startswith("data:image/svg+xml")
    secret = str(soup(page).find("input", id="totp-key")["value"])
    totp = pyotp.TOTP(secret)
    assert person.post("/ui/account/second-factor", {"code": "12345x"}).status_code == 422
    enrolled_at = utcnow()
    done = person.post("/ui/account/second-factor", {"code": totp.at(enrolled_at)})
    assert done.status_code == 201
    codes = [c.get_text() for c in soup(done).select(".recovery-codes code")]
    assert len(codes) == 10
    # Shown once: the page now only says the factor is on.
    again = person.get("/ui/account/second-factor").get_data(as_text=True)
    assert "is on" in again and codes[0] not in again
    return totp, enrolled_at, codes


def _code_step(client, code: str) -> int:
    page = client.get("/login/code")
    form = {"code": code, "csrf_token": csrf_token(page)}
    return int(client.post("/login/code", data=form).status_code)


def test_second_factor_sign_in_with_real_codes_and_replay_refused(team: Team) -> None:
    totp, enrolled_at, codes = _enrol(team.person("prod"))
    next_code = totp.at(enrolled_at + timedelta(seconds=30))
    client = team.app.test_client()
    answer = login(client, "prod")
    assert answer.status_code == 302 and answer.location.startswith("/login/code")
    assert client.get("/ui/").status_code == 302  # not signed in before the code
    # The enrolment used this step's code; the next step's code is within the allowed drift.
    assert _code_step(client, totp.at(enrolled_at)) == 401  # already used: replay refused
    assert _code_step(client, next_code) == 302
    assert client.get("/ui/").status_code == 200
    other = team.app.test_client()
    assert login(other, "prod").status_code == 302
    assert _code_step(other, next_code) == 401  # replay
    assert _code_step(other, codes[3]) == 302  # a recovery code, once
    third = team.app.test_client()
    login(third, "prod")
    assert _code_step(third, codes[3]) == 401
    assert team.app.test_client().get("/login/code").status_code == 302  # no password yet


def test_require_totp_for_admins(app: Flask, team: Team) -> None:
    app.config["REQUIRE_TOTP_FOR_ADMINS"] = True
    boss = team.person("boss")
    refused = boss.get("/ui/admin/users")
    assert refused.status_code == 302 and refused.location.endswith("/ui/account/second-factor")
    assert team.person("prod").get("/ui/").status_code == 200  # only admins must enrol
    _enrol(boss)
    assert boss.get("/ui/admin/users").status_code == 200
    assert re.search(r"Second factor", boss.get("/ui/").get_data(as_text=True))


def _audit(app: Flask, since: int = 0) -> list[tuple[str, str, Any]]:
    with db.read(app) as conn:
        rows = conn.execute(select(audit_events).where(audit_events.c.id > since)).mappings()
        return [(r["action"], r["target"], r["details"]) for r in rows]


def _last_audit_id(app: Flask) -> int:
    with db.read(app) as conn:
        return int(conn.execute(select(func.max(audit_events.c.id))).scalar() or 0)


def test_the_pending_secret_stays_out_of_the_session_cookie(team: Team) -> None:
    person = team.person("prod")
    page = person.get("/ui/account/second-factor")
    secret = str(soup(page).find("input", id="totp-key")["value"])
    cookie = person.client.get_cookie("session")
    assert cookie is not None
    session = team.app.session_interface.get_signing_serializer(team.app).loads(cookie.value)
    assert secret not in str(session) and secret not in cookie.value
    # Kept server-side: the page shows the same secret again, and it confirms the enrolment.
    again = person.get("/ui/account/second-factor")
    assert str(soup(again).find("input", id="totp-key")["value"]) == secret


def test_enrolment_and_recovery_code_sign_in_are_audited(team: Team) -> None:
    app = team.app
    before = _last_audit_id(app)
    totp, enrolled_at, codes = _enrol(team.person("prod"))
    assert ("second_factor_on", "user:prod", None) in _audit(app, before)
    client = app.test_client()
    login(client, "prod")
    before = _last_audit_id(app)
    assert _code_step(client, codes[0]) == 302
    assert _audit(app, before) == [
        ("recovery_code_used", "user:prod", {"left": 9}),
        ("sign_in", "user:prod", {"second_factor": "recovery_code"}),
    ]
    other = app.test_client()
    login(other, "prod")
    before = _last_audit_id(app)
    assert _code_step(other, totp.at(enrolled_at + timedelta(seconds=30))) == 302
    assert _audit(app, before) == [("sign_in", "user:prod", {"second_factor": "totp"})]


def test_turning_the_second_factor_off_needs_password_and_code(team: Team) -> None:
    app, person = team.app, team.person("prod")
    totp, enrolled_at, _ = _enrol(person)
    page = person.get("/ui/account/second-factor")
    assert soup(page).find(id="recovery-left").get_text() == "10"
    before = _last_audit_id(app)
    wrong_password = {"off-password": "not my password!", "off-code": totp.now()}
    refused = person.post("/ui/account/second-factor/off", wrong_password)
    assert refused.status_code == 401 and "Wrong password or code." in refused.get_data(True)
    wrong_code = {"off-password": PASSWORD, "off-code": "000000x"}
    assert person.post("/ui/account/second-factor/off", wrong_code).status_code == 401
    assert (
        person.post("/ui/account/second-factor/off", {"off-password": PASSWORD}).status_code == 422
    )
    code = totp.at(enrolled_at + timedelta(seconds=30))
    right = {"off-password": PASSWORD, "off-code": code}
    answer = person.post("/ui/account/second-factor/off", right)
    assert answer.status_code == 302, answer.get_data(True)[-3000:]
    failed = ("second_factor_change_failed", "user:prod", {"change": "second_factor_off"})
    assert _audit(app, before) == [failed, failed, ("second_factor_off", "user:prod", None)]
    assert login(app.test_client(), "prod").location == "/ui/"  # the password alone again
    assert "Scan the QR code" in person.get("/ui/account/second-factor").get_data(True)


def test_new_recovery_codes_replace_the_old_ones(team: Team) -> None:
    app, person = team.app, team.person("prod")
    _, _, old = _enrol(person)
    before = _last_audit_id(app)
    form = {"codes-password": PASSWORD, "codes-code": old[0]}  # a recovery code works too
    done = person.post("/ui/account/second-factor/recovery-codes", form)
    assert done.status_code == 201
    new = [c.get_text() for c in soup(done).select(".recovery-codes code")]
    assert len(new) == 10 and set(new).isdisjoint(old)
    assert _audit(app, before) == [("recovery_codes_new", "user:prod", None)]
    client = app.test_client()
    login(client, "prod")
    assert _code_step(client, old[1]) == 401
    assert _code_step(client, new[1]) == 302


class TestWithoutSecretsKey:
    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"SECRETS_KEY": None, "PRODUCTION": True}

    def test_production_without_a_key_refuses_to_enrol_naming_the_setting(self, team: Team) -> None:
        page = team.person("prod").get("/ui/account/second-factor")
        assert page.status_code == 503 and "SECRETS_KEY" in page.get_data(as_text=True)
