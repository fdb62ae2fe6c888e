"""SQLite writers: waiting for the write lock in short steps, bounded by the busy timeout, with
the connection's busy timeout left as configured."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy.exc import OperationalError

from app.infra import db


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"SQLITE_BUSY_TIMEOUT_MS": 2_000}


def _hold_write_lock(path: Path, seconds: float, held: threading.Event) -> None:
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    held.set()
    time.sleep(seconds)
    other.execute("COMMIT")
    other.close()


def test_a_writer_gets_the_lock_once_another_lets_it_go(app: Flask, database_path: Path) -> None:
    held = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(database_path, 0.3, held))
    holder.start()
    held.wait(5)
    try:
        with app.app_context(), db.transaction() as conn:
            conn.exec_driver_sql("UPDATE users SET name = name")
    finally:
        holder.join()


def test_the_busy_timeout_stays_configured_after_a_write(app: Flask) -> None:
    with app.app_context():
        for _ in range(2):  # the same pooled connection, before and after a write
            with db.transaction() as conn:
                assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one() == 2_000


def test_a_nested_write_ends_with_the_busy_error(app: Flask) -> None:
    """The turn is the thread's already; SQLite's lock refuses once the busy timeout passed."""
    with (
        app.app_context(),
        db.transaction(),
        pytest.raises(OperationalError, match="locked"),
        db.transaction(),
    ):
        pass
