"""Liveness and readiness on both engines: no auth, nothing revealed, 503 when not ready."""

from __future__ import annotations

from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import text

from app import create_app
from app.infra import db
from tests.api.conftest import assert_problem
from tests.backends import every_backend  # noqa: F401 (both engines)
from tests.conftest import base_config


def _reveals_nothing(body: str, app: Flask) -> None:
    url = app.config["DATABASE_URL"]
    for secret in ("0005", "0002", "alembic", url, url.rsplit("/", 1)[-1], "sqlite", "postgres"):
        assert secret not in body


def test_healthz_answers_without_auth_or_database(app: Flask, client: FlaskClient) -> None:
    db.engine(app).dispose()
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}
    assert db.engine(app).pool.checkedin() == 0  # no connection was opened


def test_readyz_is_200_on_a_migrated_database(app: Flask, client: FlaskClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ready"}
    assert "Set-Cookie" not in response.headers
    _reveals_nothing(response.get_data(as_text=True), app)


def test_readyz_is_503_when_the_schema_is_behind_head(app: Flask, client: FlaskClient) -> None:
    with app.app_context(), db.transaction() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0002'"))
    response = client.get("/readyz")
    assert_problem(response, 503)
    _reveals_nothing(response.get_data(as_text=True), app)
    assert client.get("/healthz").status_code == 200  # alive, just not ready


def test_readyz_is_503_without_a_schema(app: Flask, client: FlaskClient) -> None:
    with app.app_context(), db.transaction() as conn:
        conn.execute(text("DROP TABLE alembic_version"))
    assert_problem(client.get("/readyz"), 503)


def test_readyz_is_503_when_the_database_is_unusable(
    backend: str, client: FlaskClient, app: Flask, request: pytest.FixtureRequest
) -> None:
    assert client.get("/readyz").status_code == 200
    if backend == "sqlite":
        path: Path = request.getfixturevalue("database_path")
        db.engine(app).dispose()
        path.unlink()
        path.mkdir()  # a directory where the file was: SQLite cannot open it at all
        gone = app
    else:  # the database was dropped (or never created) on a running server
        server = request.getfixturevalue("postgres_server_url")
        gone = create_app(base_config(f"{server}/no_such_database"))
    response = gone.test_client().get("/readyz")
    assert_problem(response, 503)
    _reveals_nothing(response.get_data(as_text=True), gone)
    assert gone.test_client().get("/healthz").status_code == 200


def test_readyz_is_503_when_the_database_server_is_unreachable() -> None:
    down = create_app(base_config("postgresql+psycopg://queuelog@127.0.0.1:9/none"))
    response = down.test_client().get("/readyz")
    assert_problem(response, 503)
    _reveals_nothing(response.get_data(as_text=True), down)
