"""Fixtures for the HTML pages: people with passwords, signed-in clients, a real server and
Debian's Chromium for the browser tests."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server
from werkzeug.test import TestResponse

from app import create_app
from app.infra import db
from tests.builders import PASSWORD, Api, make_token, make_user
from tests.conftest import base_config

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def soup(response: TestResponse) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def csrf_token(response: TestResponse) -> str:
    """The CSRF token a page hands to htmx (hx-headers on <body>) or to its forms."""
    page = soup(response)
    body = page.find("body")
    if body is not None and body.get("hx-headers"):
        return str(json.loads(str(body["hx-headers"]))["X-CSRFToken"])
    field = page.find("input", attrs={"name": "csrf_token"})
    assert field is not None, "no CSRF token on the page"
    return str(field["value"])


@dataclass
class Person:
    """A signed-in browser session of one user (the Flask test client keeps the cookie)."""

    name: str
    client: FlaskClient
    csrf: str = ""

    def get(self, path: str, **kwargs: Any) -> TestResponse:
        return self.client.get(path, **kwargs)

    def htmx(self, path: str, **kwargs: Any) -> TestResponse:
        headers = {"HX-Request": "true", **kwargs.pop("headers", {})}
        return self.client.get(path, headers=headers, **kwargs)

    def post(self, path: str, data: dict[str, Any] | None = None, **kwargs: Any) -> TestResponse:
        """A form post with the CSRF token, as the page's forms send it."""
        return self.client.post(path, data={"csrf_token": self.csrf, **(data or {})}, **kwargs)

    def hx_post(self, path: str, data: dict[str, Any] | None = None) -> TestResponse:
        """A post as htmx sends it: the token in the X-CSRFToken header."""
        return self.client.post(
            path, data=data or {}, headers={"HX-Request": "true", "X-CSRFToken": self.csrf}
        )


def login(client: FlaskClient, name: str, password: str = PASSWORD) -> TestResponse:
    """Sign in through the login form (CSRF on) and return the response."""
    token = csrf_token(client.get("/login"))
    return client.post("/login", data={"username": name, "password": password, "csrf_token": token})


def sign_in(app: Flask, name: str) -> Person:
    """A fresh client signed in as ``name``, holding the CSRF token of its session."""
    client = app.test_client()
    response = login(client, name)
    assert response.status_code == 302, response.get_data(as_text=True)
    person = Person(name, client)
    person.csrf = csrf_token(client.get("/ui/"))
    return person


@dataclass
class Team:
    """One user per role (plus a second producer), each with a password and an API token."""

    app: Flask
    producer: Api
    other_producer: Api
    worker: Api
    admin: Api

    def person(self, name: str) -> Person:
        return sign_in(self.app, name)


@pytest.fixture
def team(app: Flask, client: FlaskClient) -> Team:
    apis = {}
    for name, role in [
        ("prod", "producer"),
        ("prod2", "producer"),
        ("work", "worker"),
        ("boss", "admin"),
    ]:
        make_user(app, name, role, password=PASSWORD)
        apis[name] = Api(client, make_token(app, name))
    return Team(app, apis["prod"], apis["prod2"], apis["work"], apis["boss"])


# --- real browser -------------------------------------------------------------------------


def browser_available() -> bool:
    return Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests skip without Chromium, unless QUEUELOG_REQUIRE_BROWSER=1 makes that a
    failure (CI installs Chromium, so a missing one there is a broken build, not a skip)."""
    if browser_available() or os.environ.get("QUEUELOG_REQUIRE_BROWSER") == "1":
        return
    skip = pytest.mark.skip(reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's launch arguments, pointed at Debian's Chromium."""
    if not browser_available():
        pytest.fail(f"QUEUELOG_REQUIRE_BROWSER=1 but there is no Chromium at {CHROMIUM}")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@dataclass
class LiveSite:
    """The app served over HTTP on 127.0.0.1 for the browser."""

    app: Flask
    url: str
    api: FlaskClient


@pytest.fixture(scope="session")
def live_site(
    tmp_path_factory: pytest.TempPathFactory, migrated_template: Path
) -> Iterator[LiveSite]:
    """A real server (werkzeug, threaded) on its own SQLite file, for the whole session."""
    yield from serve_site(tmp_path_factory, migrated_template, UI_POLL_SECONDS=1)


def serve_site(
    tmp_path_factory: pytest.TempPathFactory, migrated_template: Path, **config: Any
) -> Iterator[LiveSite]:
    """The app with ``config`` served on 127.0.0.1 from its own SQLite file, until closed."""
    path = tmp_path_factory.mktemp("live") / "queuelog.sqlite3"
    shutil.copy(migrated_template, path)
    app = create_app(base_config(f"sqlite:///{path}", **config))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="live-site", daemon=True)
    thread.start()
    try:
        yield LiveSite(app, f"http://127.0.0.1:{server.server_port}", app.test_client())
    finally:
        server.shutdown()
        thread.join(timeout=10)
        db.close(app)
