"""Helpers for the API tests: direct SQL views of the database and a real threaded server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import func, select, text
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.test import TestResponse

from app.infra import db
from app.storage.schema import job_events, jobs
from tests.backends import every_backend  # noqa: F401 (every API test runs on both engines)
from tests.builders import Api


def job_count(app: Flask) -> int:
    """How many rows ``jobs`` holds, read with SQL."""
    with app.app_context(), db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(jobs)).scalar_one())


def snapshot(app: Flask) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every row of ``jobs`` and ``job_events``, to prove a request changed nothing."""
    with app.app_context(), db.read() as conn:
        job_rows = [tuple(r) for r in conn.execute(text("SELECT * FROM jobs ORDER BY id"))]
        event_rows = [tuple(r) for r in conn.execute(text("SELECT * FROM job_events ORDER BY id"))]
    return job_rows, event_rows


def job_row(app: Flask, job_id: int) -> dict[str, Any]:
    """One ``jobs`` row as stored."""
    with app.app_context(), db.read() as conn:
        row = conn.execute(select(jobs).where(jobs.c.id == job_id)).one()
    return dict(row._mapping)


def event_rows(app: Flask, job_id: int) -> list[dict[str, Any]]:
    """A job's ``job_events`` rows, oldest first."""
    with app.app_context(), db.read() as conn:
        query = select(job_events).where(job_events.c.job_id == job_id).order_by(job_events.c.id)
        return [dict(r._mapping) for r in conn.execute(query)]


def assert_problem(response: TestResponse, status: int) -> dict[str, Any]:
    """Assert an RFC 9457 problem response with ``status`` and return its body."""
    assert response.status_code == status, (response.status_code, response.get_data()[:300])
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["status"] == status
    assert isinstance(body["type"], str) and body["type"]
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    if status == 422:
        assert isinstance(body["errors"], dict) and body["errors"]
        assert all(isinstance(v, str) and v for v in body["errors"].values())
    return body  # type: ignore[no-any-return]


def finish(worker: Api, job: dict[str, Any], outcome: str = "completed") -> None:
    """Report ``job``'s attempt ``completed`` or ``failed`` for good, through ``worker``."""
    item: dict[str, Any] = {"id": job["id"], "attempt": job["attempt"], "outcome": outcome}
    if outcome == "failed":
        item |= {"error": "boom", "retryable": False}
    answer = worker.post("/jobs/finish", {"results": [item]}).get_json()
    assert answer["results"][0]["status"] == 200, answer


@dataclass
class LiveServer:
    """A real HTTP server on 127.0.0.1 serving the test app in threads."""

    host: str
    port: int


@pytest.fixture
def live_server(app: Flask) -> Iterator[LiveServer]:
    """Serve ``app`` with werkzeug's threaded server on an ephemeral port; stop it afterwards."""
    server: BaseWSGIServer = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield LiveServer("127.0.0.1", server.server_port)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
