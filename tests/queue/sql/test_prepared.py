"""Prepared statements give what ``Connection.execute`` gives, on both engines: the same values,
SQLAlchemy's exceptions, cursor events, and a transaction begun when none was."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import bindparam, event, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.infra import db
from app.queue.sql.jobs import JOB_COLUMNS
from app.queue.sql.prepared import Prepared
from app.storage.schema import jobs
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_user

AT = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
_INSERT = Prepared(
    insert(jobs)
    .values(
        {
            name: bindparam(name, type_=jobs.c[name].type)
            for name in ("type", "payload", "created_by", "run_at", "created_at", "updated_at")
        }
    )
    .returning(*JOB_COLUMNS)
)
_BY_ID = select(*JOB_COLUMNS).where(jobs.c.id == bindparam("job_id"))


def _values(owner: int, **extra: Any) -> dict[str, Any]:
    return {
        "type": "email.send",
        "payload": {"to": "ada@example.com", "n": [1, 2.5, None]},
        "created_by": owner,
        "run_at": AT,
        "created_at": AT,
        "updated_at": AT,
    } | extra


def test_rows_are_what_execute_returns(app: Flask, backend: str) -> None:
    owner = make_user(app, "owner").id
    with app.app_context(), db.transaction() as conn:
        inserted = _INSERT.row(conn, _values(owner))
        assert inserted is not None
        by_id = {"job_id": inserted[0]}
        expected = tuple(conn.execute(_BY_ID, by_id).one())
        assert Prepared(_BY_ID).row(conn, by_id) == expected == inserted
    assert expected[JOB_COLUMNS.index(jobs.c.run_at)] == AT  # aware UTC, microseconds kept
    assert expected[JOB_COLUMNS.index(jobs.c.payload)] == _values(owner)["payload"]
    assert expected[JOB_COLUMNS.index(jobs.c.result)] is None


def test_literal_values_bound_in_the_statement_are_sent(app: Flask, backend: str) -> None:
    owner = make_user(app, "owner").id
    set_retries = Prepared(
        update(jobs).where(jobs.c.id == bindparam("job_id")).values(progress=30, max_retries=7)
    )
    with app.app_context(), db.transaction() as conn:
        row = _INSERT.row(conn, _values(owner))
        assert row is not None
        assert set_retries.run(conn, {"job_id": row[0]}) == 1
        stored = conn.execute(select(jobs.c.progress, jobs.c.max_retries)).one()
    assert tuple(stored) == (30, 7)


def test_driver_errors_arrive_as_sqlalchemy_exceptions(app: Flask, backend: str) -> None:
    owner = make_user(app, "owner").id
    with app.app_context(), db.transaction() as conn:
        with pytest.raises(IntegrityError), conn.begin_nested():
            _INSERT.row(conn, _values(owner + 1000))  # no such user: the foreign key refuses
        assert _INSERT.row(conn, _values(owner)) is not None  # the savepoint kept the rest


def test_cursor_events_see_prepared_statements(app: Flask, backend: str) -> None:
    owner = make_user(app, "owner").id
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        seen.append(sql)

    engine = db.engine(app)
    event.listen(engine, "before_cursor_execute", record)
    try:
        with app.app_context(), db.transaction() as conn:
            _INSERT.row(conn, _values(owner))
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert any(sql.startswith("INSERT INTO jobs") for sql in seen), seen


def test_a_connection_outside_a_transaction_begins_one(app: Flask, backend: str) -> None:
    owner = make_user(app, "owner").id
    with db.engine(app).connect() as conn:
        assert not conn.in_transaction()
        _INSERT.row(conn, _values(owner))
        assert conn.in_transaction()
        conn.rollback()  # as with Connection.execute, nothing was committed behind our back
        assert conn.execute(select(func.count()).select_from(jobs)).scalar_one() == 0


def test_expanding_parameters_are_refused(app: Flask) -> None:
    listed = Prepared(select(jobs.c.id).where(jobs.c.id.in_(bindparam("ids", expanding=True))))
    with app.app_context(), db.read() as conn, pytest.raises(ValueError, match="one value"):
        listed.rows(conn, {"ids": [1, 2]})
