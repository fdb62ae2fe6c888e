"""Over HTTPS the session cookie is Secure and __Host- prefixed (and read back under that name);
cookie-authenticated posts from another site are refused even with a valid CSRF token."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.builders import PASSWORD
from tests.web.conftest import Team, csrf_token


def _sign_in_over(client: Any, base_url: str, headers: dict[str, str]) -> Any:
    page = client.get("/login", base_url=base_url, headers=headers)
    site = headers.get("X-Forwarded-Host", "localhost")
    scheme = headers.get("X-Forwarded-Proto", base_url.partition(":")[0])
    return client.post(
        "/login",
        base_url=base_url,
        headers={**headers, "Referer": f"{scheme}://{site}/login"},  # Flask-WTF's HTTPS check
        data={"username": "prod", "password": PASSWORD, "csrf_token": csrf_token(page)},
    )


def test_session_cookie_is_host_prefixed_and_secure_over_https(team: Team) -> None:
    client = team.app.test_client()
    response = _sign_in_over(client, "https://localhost", {})
    assert response.status_code == 302
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("__Host-session=") and "Secure" in cookie and "Path=/" in cookie
    assert "Domain" not in cookie
    assert client.get("/ui/", base_url="https://localhost").status_code == 200
    # Plain HTTP (development) keeps the plain name and does not read the HTTPS cookie.
    plain = team.app.test_client()
    assert _sign_in_over(plain, "http://localhost", {}).headers["Set-Cookie"].startswith("session=")
    assert plain.get("/ui/").status_code == 200


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"TRUSTED_PROXIES": 1}


def test_https_at_a_trusted_proxy_gives_the_host_prefixed_cookie(team: Team) -> None:
    client = team.app.test_client()
    https = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "queue.example"}
    response = _sign_in_over(client, "http://localhost", https)
    assert response.headers["Set-Cookie"].startswith("__Host-session=")
    assert client.get("/ui/", headers=https).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://localhost", "Sec-Fetch-Site": "cross-site"},
    ],
)
def test_cross_site_posts_are_refused_even_with_a_csrf_token(
    app: Flask, team: Team, headers: dict[str, str]
) -> None:
    producer = team.person("prod")
    form = {
        "csrf_token": producer.csrf,
        "type": "email.send",
        "payload": "{}",
        "priority": "low",
        "max_retries": "3",
    }
    refused = producer.client.post("/ui/jobs/new", data=form, headers=headers)
    assert refused.status_code == 403
    assert team.producer.get("/jobs").get_json()["jobs"] == []
    same_site = {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}
    assert producer.client.post("/ui/jobs/new", data=form, headers=same_site).status_code == 302
