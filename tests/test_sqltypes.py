"""Timestamps on SQLite: the text queuelog writes is the text SQLAlchemy's own DATETIME writes
(so stored values keep comparing and sorting as before), and what it reads back is aware UTC."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import DateTime, select, update
from sqlalchemy.dialects import sqlite

from app.infra import db
from app.storage.schema import users
from app.storage.sqltypes import UTCDateTime
from tests.builders import make_user

DIALECT = sqlite.dialect()
WRITE = UTCDateTime().dialect_impl(DIALECT).bind_processor(DIALECT)
READ = UTCDateTime().dialect_impl(DIALECT).result_processor(DIALECT, None)
SQLALCHEMY_WRITE = DateTime().dialect_impl(DIALECT).bind_processor(DIALECT)
SQLALCHEMY_READ = DateTime().dialect_impl(DIALECT).result_processor(DIALECT, None)
MOMENTS = [
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(999, 2, 3, 4, 5, 6, 7, tzinfo=UTC),
    datetime(2026, 12, 2, 3, 4, 5, 678901, tzinfo=UTC),
    datetime(2026, 12, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


@pytest.mark.parametrize("moment", MOMENTS, ids=str)
def test_the_stored_text_is_sqlalchemys_and_reads_back_equal(moment: datetime) -> None:
    assert WRITE is not None and READ is not None
    assert SQLALCHEMY_WRITE is not None and SQLALCHEMY_READ is not None
    text = WRITE(moment)
    assert text == SQLALCHEMY_WRITE(moment.astimezone(UTC).replace(tzinfo=None))
    read = READ(text)
    assert read == moment and read.tzinfo is UTC
    assert read == SQLALCHEMY_READ(text).replace(tzinfo=UTC)


@pytest.mark.parametrize("text", ["2026-12-02 03:04:05", "2026-12-02 03:04:05.5", "2026-12-02"])
def test_text_written_by_others_reads_as_sqlalchemy_reads_it(text: str) -> None:
    assert READ is not None and SQLALCHEMY_READ is not None
    assert READ(text) == SQLALCHEMY_READ(text).replace(tzinfo=UTC)


def test_naive_datetimes_and_none() -> None:
    assert WRITE is not None and READ is not None
    assert WRITE(None) is None and READ(None) is None
    with pytest.raises(ValueError, match="naive"):
        WRITE(datetime(2026, 1, 1))


def test_a_value_written_through_the_app_is_that_text_in_the_file(
    app: Flask, database_path: Path
) -> None:
    """End to end: the column holds SQLAlchemy's text, and a comparison in SQL still selects
    by time (text order is time order)."""
    user = make_user(app, "clock")
    moment = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=-2)))
    with app.app_context(), db.transaction() as conn:
        conn.execute(update(users).where(users.c.id == user.id).values(created_at=moment))
    raw = sqlite3.connect(database_path)
    try:
        (stored,) = raw.execute("SELECT created_at FROM users WHERE id = ?", (user.id,)).fetchone()
    finally:
        raw.close()
    assert stored == "2030-01-02 05:04:05.678901"
    with app.app_context(), db.read() as conn:
        before = select(users.c.created_at).where(
            users.c.id == user.id, users.c.created_at < moment + timedelta(microseconds=1)
        )
        assert conn.execute(before).scalar_one() == moment
