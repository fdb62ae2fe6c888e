"""Shared fixtures: a migrated SQLite file per test, clients, API callers per role."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from app import create_app, migrate
from tests.builders import Api, make_api

TEST_SECRET = "test-secret-key-" + "x" * 40
JOB_TYPES = ["email.send", "report.build", "webhook.deliver"]


def base_config(database_url: str, **overrides: Any) -> dict[str, Any]:
    """The config every test app starts from."""
    return {
        "TESTING": True,
        "SECRET_KEY": TEST_SECRET,
        "DATABASE_URL": database_url,
        "JOB_TYPES": JOB_TYPES,
        "SQLITE_SYNCHRONOUS": "NORMAL",
        **overrides,
    }


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per session; each test gets a copy."""
    path = tmp_path_factory.mktemp("template") / "queuelog.sqlite3"
    app = create_app(base_config(f"sqlite:///{path}"))
    migrate.upgrade(app)
    app.extensions["queuelog.db"].dispose()
    return path


@pytest.fixture
def database_path(tmp_path: Path, migrated_template: Path) -> Path:
    """A fresh, migrated SQLite file for this test."""
    path = tmp_path / "queuelog.sqlite3"
    shutil.copy(migrated_template, path)
    return path


@pytest.fixture
def app_config() -> dict[str, Any]:
    """Per-test config overrides (override this fixture in a module to change settings)."""
    return {}


@pytest.fixture
def app(database_path: Path, app_config: dict[str, Any]) -> Iterator[Flask]:
    """The app on a real SQLite file."""
    application = create_app(base_config(f"sqlite:///{database_path}", **app_config))
    yield application
    application.extensions["queuelog.db"].dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(app: Flask) -> FlaskCliRunner:
    return app.test_cli_runner()


@pytest.fixture
def producer(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "producer", "producer")


@pytest.fixture
def other_producer(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "other-producer", "producer")


@pytest.fixture
def worker(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "worker", "worker")


@pytest.fixture
def other_worker(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "other-worker", "worker")


@pytest.fixture
def admin(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "admin", "admin")


@pytest.fixture
def anonymous(client: FlaskClient) -> Api:
    return Api(client, None)
