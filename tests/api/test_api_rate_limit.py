"""The optional per-token API rate limit: 429 problem+json with Retry-After, counted in memory
(never a database write per request), and no limiter at all unless configured."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text

from app.infra import db
from tests.builders import Api


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"API_RATE_LIMIT": "3 per minute"}


def test_api_rate_limit_per_token_answers_429_problem(
    app: Flask, producer: Api, other_producer: Api
) -> None:
    assert [producer.get("/jobs").status_code for _ in range(3)] == [200] * 3
    refused = producer.get("/jobs")
    assert refused.status_code == 429
    assert refused.headers["Content-Type"] == "application/problem+json"
    assert refused.get_json()["status"] == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert producer.post("/jobs", {"type": "email.send"}).status_code == 429  # nothing stored
    assert other_producer.get("/jobs").status_code == 200  # per token
    with db.read(app) as conn:
        assert conn.execute(text("SELECT count(*) FROM rate_limits")).scalar_one() == 0
        assert conn.execute(text("SELECT count(*) FROM jobs")).scalar_one() == 0


def test_without_api_rate_limit_the_limiter_is_off(database_url: str) -> None:
    from app import create_app
    from tests.conftest import base_config

    app = create_app(base_config(database_url))
    assert app.config["RATELIMIT_ENABLED"] is False
    db.close(app)
