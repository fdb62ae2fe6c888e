"""SQLite durability settings, and a lock held too long: 503 + Retry-After, never a 500."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from app import create_app
from app.infra import db
from app.storage import migrate
from app.storage.databases import sqlite
from tests.builders import Api, make_token, make_user
from tests.conftest import TEST_SECRET


def _pragmas(app: Flask) -> tuple[str, int, int]:
    with db.engine(app).connect() as conn:
        return (
            conn.exec_driver_sql("PRAGMA journal_mode").scalar_one(),
            conn.exec_driver_sql("PRAGMA synchronous").scalar_one(),
            conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one(),
        )


@contextmanager
def _app(database_path: Path, **config: Any) -> Iterator[Flask]:
    # No SQLITE_SYNCHRONOUS here: the shared test config sets NORMAL, this checks the default.
    app = create_app(
        {"TESTING": True, "SECRET_KEY": TEST_SECRET, "DATABASE_URL": f"sqlite:///{database_path}"}
        | config
    )
    try:
        yield app
    finally:
        db.engine(app).dispose()


def test_wal_and_synchronous_full_by_default(database_path: Path) -> None:
    with _app(database_path) as app:
        assert _pragmas(app) == ("wal", 2, 10_000)


def test_synchronous_normal_when_configured(database_path: Path) -> None:
    with _app(database_path, SQLITE_SYNCHRONOUS="NORMAL", SQLITE_BUSY_TIMEOUT_MS=250) as app:
        assert _pragmas(app) == ("wal", 1, 250)


def _page_size(path: Path) -> int:
    with sqlite3.connect(path) as other:
        return int(other.execute("PRAGMA page_size").fetchone()[0])


def test_a_new_database_file_gets_small_pages(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    with _app(path) as app:
        migrate.upgrade(db.engine(app))
    assert _page_size(path) == sqlite.PAGE_SIZE == 1024


def test_an_existing_file_keeps_its_pages_and_works(tmp_path: Path) -> None:
    path = tmp_path / "older.sqlite3"
    older = sqlite3.connect(path)  # a file made with SQLite's default pages
    older.execute("PRAGMA page_size=4096")
    older.execute("PRAGMA journal_mode=WAL")
    older.execute("CREATE TABLE made_earlier (id INTEGER PRIMARY KEY)")
    older.close()
    with _app(path) as app:
        migrate.upgrade(db.engine(app))
        assert _pragmas(app) == ("wal", 2, 10_000)
        make_user(app, "p", "producer")
        answer = Api(app.test_client(), make_token(app, "p")).post(
            "/jobs", {"type": "email.send", "payload": {}}
        )
        assert answer.status_code == 201, answer.get_json()
    assert _page_size(path) == 4096


def test_unknown_synchronous_value_is_refused(database_path: Path) -> None:
    """Refused before anything is made: not even the database's folder."""
    folder = database_path.parent / "unmade"
    with pytest.raises(ValueError, match="SQLITE_SYNCHRONOUS"):
        create_app(
            {
                "TESTING": True,
                "SECRET_KEY": TEST_SECRET,
                "DATABASE_URL": f"sqlite:///{folder / 'queuelog.sqlite3'}",
                "SQLITE_SYNCHRONOUS": "OFF",
            }
        )
    assert not folder.exists()


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"SQLITE_BUSY_TIMEOUT_MS": 50}


@contextmanager
def _write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Another process-like connection holding SQLite's write lock."""
    other = sqlite3.connect(path, isolation_level=None, timeout=5)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield other
    finally:
        other.execute("ROLLBACK")
        other.close()


def _count(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608
    finally:
        conn.close()


def test_locked_database_answers_503_with_retry_after_and_writes_nothing(
    database_path: Path, producer: Api, worker: Api
) -> None:
    job = producer.enqueue()  # also records the tokens' first use, so only the write waits
    assert worker.get("/jobs").status_code == 200
    jobs, events = _count(database_path, "jobs"), _count(database_path, "job_events")
    with _write_lock(database_path):
        writes = {
            "enqueue": producer.post("/jobs", {"type": "email.send"}),
            "claim": worker.post("/jobs/claim"),
            "cancel": producer.post(f"/jobs/{job['id']}/cancel"),
        }
        read = producer.get(f"/jobs/{job['id']}")  # WAL: readers never wait for the writer
    for name, response in writes.items():
        assert response.status_code == 503, (name, response.status_code, response.get_json())
        assert response.headers["Retry-After"].isdigit(), name
        assert response.mimetype == "application/problem+json"
        assert response.get_json()["status"] == 503
    assert read.status_code == 200
    assert (_count(database_path, "jobs"), _count(database_path, "job_events")) == (jobs, events)
    assert producer.get(f"/jobs/{job['id']}").get_json()["status"] == "pending"
    # and once the lock is gone, the same requests go through
    assert producer.post("/jobs", {"type": "email.send"}).status_code == 201


def test_locked_database_during_authentication_is_503_too(
    database_path: Path, app: Flask, client: Any
) -> None:
    """A token's first use writes last_used_at: under a lock that must be a 503 as well."""
    make_user(app, "fresh", "worker")
    fresh = Api(client, make_token(app, "fresh"))
    with _write_lock(database_path):
        response = fresh.post("/jobs/claim")
    assert response.status_code == 503
    assert "Retry-After" in response.headers
