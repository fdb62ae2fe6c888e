"""Sign-in and sign-out: CSRF, rate limit, fixation, logout really ending sessions, `next`."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.builders import PASSWORD
from tests.web.conftest import Team, csrf_token, login, sign_in, soup


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"LOGIN_RATE_LIMIT": "3 per minute"}


def test_root_redirects_to_dashboard(client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response.location == "/ui/"


def test_pages_redirect_anonymous_people_to_login(client) -> None:
    response = client.get("/ui/jobs?status=failed")
    assert response.status_code == 302
    assert response.location == "/login?next=/ui/jobs?status%3Dfailed"


def test_anonymous_htmx_request_gets_401_with_hx_redirect(client) -> None:
    response = client.get("/ui/jobs", headers={"HX-Request": "true"})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"].startswith("/login?next=")
    assert response.get_data() == b""


def test_login_page_has_labelled_fields_and_csrf(client) -> None:
    page = soup(client.get("/login"))
    for name in ("username", "password"):
        field = page.find("input", attrs={"name": name})
        assert field is not None
        assert page.find("label", attrs={"for": field["id"]}) is not None
    assert page.find("input", attrs={"name": "csrf_token"})["value"]


def test_login_with_right_password_signs_in(team: Team) -> None:
    person = team.person("prod")
    assert person.get("/ui/").status_code == 200


def test_failed_logins_say_nothing_about_the_user(team: Team, client) -> None:
    wrong_password = login(client, "prod", "not the password")
    unknown_user = login(client, "nobody-here", "not the password")
    assert wrong_password.status_code == unknown_user.status_code == 401
    message = "Invalid user name or password."
    assert message in wrong_password.get_data(as_text=True)
    assert message in unknown_user.get_data(as_text=True)
    assert "nobody-here" not in unknown_user.get_data(as_text=True).replace(
        'value="nobody-here"', ""
    )


def test_disabled_user_cannot_sign_in(team: Team, client) -> None:
    boss = team.person("boss")
    assert boss.post("/ui/admin/users/prod2/disable").status_code == 302
    assert login(client, "prod2").status_code == 401


def test_failed_logins_are_rate_limited_with_retry_after(team: Team, client) -> None:
    for _ in range(3):
        assert login(client, "prod", "wrong password!!").status_code == 401
    response = login(client, "prod", "wrong password!!")
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) > 0
    # Even the right password waits: guessing cannot continue by mixing in a known account.
    assert login(client, "prod").status_code == 429


def test_successful_logins_do_not_use_up_the_limit(team: Team) -> None:
    for _ in range(5):
        sign_in(team.app, "prod")


def test_login_post_without_csrf_token_is_refused(team: Team, client) -> None:
    response = client.post("/login", data={"username": "prod", "password": PASSWORD})
    assert response.status_code == 400
    assert client.get("/ui/").status_code == 302


def test_session_cookie_is_renewed_at_login(team: Team, client) -> None:
    client.get("/login")
    before = client.get_cookie("session").value
    assert login(client, "prod").status_code == 302
    after = client.get_cookie("session").value
    assert before != after
    # The pre-login cookie (e.g. planted by an attacker) does not carry the new identity.
    planted = team.app.test_client()
    planted.set_cookie("session", before)
    assert planted.get("/ui/").status_code == 302


def test_session_cookie_flags(team: Team, client) -> None:
    response = login(client, "prod")
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Lax" in cookie


def test_session_cookie_is_secure_over_https(team: Team) -> None:
    client = team.app.test_client()
    page = client.get("/login", base_url="https://localhost")
    response = client.post(
        "/login",
        data={"username": "prod", "password": PASSWORD, "csrf_token": csrf_token(page)},
        base_url="https://localhost",
        headers={"Referer": "https://localhost/login"},
    )
    assert response.status_code == 302
    assert "Secure" in response.headers["Set-Cookie"]


class TestBehindATrustedProxy:
    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"TRUSTED_PROXIES": 1}

    def test_https_at_the_proxy_makes_the_cookie_secure(self, team: Team) -> None:
        client = team.app.test_client()
        https = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "queue.example"}
        page = client.get("/login", headers=https)
        assert page.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
        assert page.headers["Cross-Origin-Opener-Policy"] == "same-origin"
        response = client.post(
            "/login",
            data={"username": "prod", "password": PASSWORD, "csrf_token": csrf_token(page)},
            headers={**https, "Referer": "https://queue.example/login"},
        )
        assert response.status_code == 302
        assert "Secure" in response.headers["Set-Cookie"]

    def test_without_the_forwarded_proto_it_is_plain_http(self, team: Team) -> None:
        response = team.app.test_client().get("/login")
        assert "Strict-Transport-Security" not in response.headers
        assert response.headers["Cross-Origin-Opener-Policy"] == "same-origin"


def test_logout_needs_post_and_csrf(team: Team) -> None:
    person = team.person("prod")
    assert person.get("/logout").status_code == 405
    assert person.client.post("/logout").status_code == 400
    assert person.get("/ui/").status_code == 200


def test_a_copied_cookie_stops_working_after_logout(team: Team) -> None:
    person = team.person("prod")
    copied = person.client.get_cookie("session").value
    assert person.post("/logout").status_code == 302
    thief = team.app.test_client()
    thief.set_cookie("session", copied)
    response = thief.get("/ui/")
    assert response.status_code == 302
    assert response.location.startswith("/login")


def test_logout_ends_the_users_other_sessions_too(team: Team) -> None:
    laptop = team.person("prod")
    phone = team.person("prod")
    laptop.post("/logout")
    assert phone.get("/ui/").status_code == 302


@pytest.mark.parametrize(
    ("next_value", "expected"),
    [
        ("/ui/jobs?status=failed", "/ui/jobs?status=failed"),
        ("//evil.example/", "/ui/"),
        ("https://evil.example/", "/ui/"),
        ("/\\evil.example", "/ui/"),
        ("javascript:alert(1)", "/ui/"),
        ("/ui/\r\nSet-Cookie:x=1", "/ui/"),
        ("", "/ui/"),
    ],
)
def test_next_redirects_only_to_local_paths(app: Flask, team: Team, next_value, expected) -> None:
    client = app.test_client()
    page = client.get("/login")
    response = client.post(
        "/login",
        query_string={"next": next_value},
        data={"username": "prod", "password": PASSWORD, "csrf_token": csrf_token(page)},
    )
    assert response.status_code == 302
    assert response.location == expected


def test_a_login_expires_after_the_session_lifetime_however_active(team: Team, app: Flask) -> None:
    prod = team.person("prod")
    assert prod.get("/ui/").status_code == 200
    lifetime = app.permanent_session_lifetime.total_seconds()
    with prod.client.session_transaction() as session:
        session["login_at"] -= lifetime + 1
    response = prod.get("/ui/")
    assert response.status_code == 302
    assert response.location.startswith("/login")
