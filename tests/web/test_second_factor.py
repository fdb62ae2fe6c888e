"""The optional second factor in the pages: enrolment with a QR code, sign-in with real codes,
replay refused, recovery codes, and REQUIRE_TOTP_FOR_ADMINS."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pyotp
from flask import Flask

from app.timeutil import utcnow
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
