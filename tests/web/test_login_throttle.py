"""The per-account sign-in throttle: it spans client addresses, counts only failures and ends
with its window, so it cannot keep the real user out for longer than that."""

from __future__ import annotations

import time
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.builders import PASSWORD
from tests.web.conftest import Team, csrf_token

WINDOW = 10  # long enough for four argon2 checks on a busy machine


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {
        "LOGIN_RATE_LIMIT": "100 per minute",
        "LOGIN_ACCOUNT_RATE_LIMIT": f"3 per {WINDOW} seconds",
    }


def _login_from(client: FlaskClient, address: str, name: str, password: str) -> TestResponse:
    environ = {"REMOTE_ADDR": address}
    token = csrf_token(client.get("/login", environ_base=environ))
    form = {"username": name, "password": password, "csrf_token": token}
    return client.post("/login", data=form, environ_base=environ)


def test_account_throttle_spans_addresses_and_ends_with_its_window(
    team: Team, client: FlaskClient
) -> None:
    # Correct sign-ins give their attempt back: they never use the limit up. (Another account,
    # so that the window below starts with the first failure, however slow the machine.)
    for n in range(5):
        assert _login_from(client, f"10.0.0.{n}", "prod2", PASSWORD).status_code == 302
    started = time.monotonic()
    for n in range(3):
        assert _login_from(client, f"10.0.1.{n}", "PROD", "wrong password!!").status_code == 401
    refused = _login_from(client, "10.0.2.1", "prod", PASSWORD)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= WINDOW + 1
    assert _login_from(client, "10.0.2.2", "prod2", PASSWORD).status_code == 302  # others fine
    time.sleep(max(0.0, WINDOW + 0.2 - (time.monotonic() - started)))
    assert _login_from(client, "10.0.2.3", "prod", PASSWORD).status_code == 302
