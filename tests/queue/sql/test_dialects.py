"""The ``Dialect`` interface's contract, run against both implementations (River's driver test
suite idea): each primitive the shared statements are built from behaves the same on SQLite and
on PostgreSQL, and where the engines differ by design (row locks, advisory locks) the difference
is the documented one."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import BigInteger, Column, Connection, MetaData, Table, Text, bindparam, select

from app.infra import db
from app.queue.sql import dialects
from app.queue.sql.dialects import Dialect
from app.queue.sql.items import Columns, Kind, parameter
from app.storage.sqltypes import sqlite_timestamp
from tests.backends import every_backend  # noqa: F401 (run on both engines)

EVERY_KIND: Columns = (
    ("id", Kind.BIGINT),
    ("n", Kind.INTEGER),
    ("label", Kind.TEXT),
    ("at", Kind.TIMESTAMP),
    ("doc", Kind.JSON),
)
ROWS = [
    {"id": 2**53 + 7, "n": -3, "label": "ünïcode ✓ 'quoted'", "at": datetime(2026, 1, 2, 3, 4, 5,
     678901, tzinfo=UTC), "doc": {"nested": [1, {"a": None}], "text": "é"}},
    {"id": 1, "n": 0, "label": "", "at": datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
     "doc": []},
    {"id": 5, "n": 2**31 - 1, "label": None, "at": None, "doc": None},
]  # fmt: skip

scratch = Table(
    "engine_scratch",
    MetaData(),
    Column("id", BigInteger, primary_key=True),
    Column("label", Text, nullable=False),
)


@pytest.fixture
def dialect(app: Flask) -> Dialect:
    return dialects.of(db.engine(app))


@pytest.fixture
def table(app: Flask) -> Iterator[Table]:
    """A scratch table of ten rows, dropped afterwards."""
    with db.engine(app).begin() as conn:
        scratch.create(conn)
        conn.execute(scratch.insert(), [{"id": i, "label": f"row {i}"} for i in range(1, 11)])
    yield scratch
    with db.engine(app).begin() as conn:
        scratch.drop(conn)


def _hold(app: Flask, work: Any, started: threading.Event, release: threading.Event) -> None:
    """Run ``work(conn)`` in a transaction on another connection and keep it open until told."""
    with db.engine(app).begin() as conn:
        work(conn)
        started.set()
        release.wait(10)


def test_dialects_are_found_by_name(app: Flask, dialect: Dialect, backend: str) -> None:
    assert dialect.name == backend
    assert dialect.locks_rows is (backend == "postgresql")
    with db.engine(app).connect() as conn:
        assert dialects.of(conn) is dialect


def test_items_give_back_every_kind_in_order(app: Flask, dialect: Dialect) -> None:
    items = dialect.items(EVERY_KIND)
    values = [dialect.item_value(items, name, kind).label(name) for name, kind in EVERY_KIND]
    query = select(*values, items.c.position).order_by(items.c.position)
    with db.engine(app).connect() as conn:
        got = conn.execute(query, {"items": parameter(EVERY_KIND, ROWS)}).all()
    assert [row.position for row in got] == [0, 1, 2]
    assert [(row.id, row.n, row.label) for row in got] == [
        (r["id"], r["n"], r["label"]) for r in ROWS
    ]
    timestamps = [sqlite_timestamp(r["at"]) for r in ROWS]
    assert [_text(row.at) for row in got] == [_text(t) for t in timestamps]
    assert [_document(row.doc) for row in got] == [r["doc"] for r in ROWS]


def _text(value: Any) -> Any:
    """A timestamp as the SQLite dialect stores it, whichever dialect read it."""
    if isinstance(value, datetime):
        return sqlite_timestamp(value.replace(tzinfo=UTC))
    return value


def _document(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def test_an_empty_items_list_is_no_rows(app: Flask, dialect: Dialect) -> None:
    items = dialect.items(EVERY_KIND)
    with db.engine(app).connect() as conn:
        assert conn.execute(select(items.c.id), {"items": "[]"}).all() == []


def test_insert_knows_on_conflict(app: Flask, dialect: Dialect, table: Table) -> None:
    rows = [{"id": 3, "label": "kept?"}, {"id": 42, "label": "new"}]
    with db.engine(app).begin() as conn:
        conn.execute(dialect.insert(table).on_conflict_do_nothing(), rows)
        upsert = dialect.insert(table)
        conn.execute(
            upsert.on_conflict_do_update(
                index_elements=["id"], set_={"label": upsert.excluded.label}
            ),
            {"id": 4, "label": "updated"},
        )
        labels = dict(conn.execute(select(table.c.id, table.c.label)).all())
    assert (labels[3], labels[4], labels[42], len(labels)) == ("row 3", "updated", "new", 11)


def test_head_takes_the_first_rows_in_order(app: Flask, dialect: Dialect) -> None:
    """``head`` over the jobs table: the first ``:limit`` ids matching, in the given order."""
    from tests.harness import make_queue

    queue = make_queue(app)
    ids = [queue.enqueue(priority=p).id for p in ("low", "medium", "low", "medium")]
    head = dialect.head(
        "ix_jobs_claim",
        "status = 'pending' AND waiting_for IS NULL AND priority >= :floor",
        "priority DESC, id",
        bindparam("floor", 10),
    )  # fmt: skip
    with db.engine(app).connect() as conn:
        got = [row.id for row in conn.execute(select(head.subquery().c.id), {"limit": 2})]
    assert got == [ids[1], ids[3]]


def test_skip_locked_passes_over_rows_another_transaction_holds(
    app: Flask, dialect: Dialect, table: Table
) -> None:
    """PostgreSQL: a held row is skipped, never waited for. SQLite has one writer at a time, so
    there is nothing to skip: the query reads every row."""
    started, release = threading.Event(), threading.Event()

    def take_first_three(conn: Connection) -> None:
        conn.execute(dialect.locked(select(table.c.id).where(table.c.id <= 3))).all()

    holder = threading.Thread(target=_hold, args=(app, take_first_three, started, release))
    if dialect.locks_rows:
        holder.start()
        assert started.wait(10)
    try:
        with db.engine(app).connect() as conn:
            query = dialect.skip_locked(select(table.c.id).order_by(table.c.id).limit(5))
            begun = time.monotonic()
            got = [row.id for row in conn.execute(query)]
            waited = time.monotonic() - begun
            conn.rollback()
    finally:
        release.set()
        if holder.is_alive():
            holder.join()
    assert got == ([4, 5, 6, 7, 8] if dialect.locks_rows else [1, 2, 3, 4, 5])
    assert waited < 1


def test_lock_keys_serializes_transactions_on_a_key(app: Flask, dialect: Dialect) -> None:
    """PostgreSQL: a second transaction locking the same key waits until the first ends, and a
    different key does not wait. SQLite: the write lock already serializes, the call is free.
    Told by the order of events, not by durations (a busy machine stretches those)."""
    started, release = threading.Event(), threading.Event()
    released: list[float] = []  # when the first transaction was let go

    def lock(conn: Connection) -> None:
        dialect.lock_keys(conn, [7, 3])

    def let_go() -> None:
        released.append(time.monotonic())
        release.set()

    holder = threading.Thread(target=_hold, args=(app, lock, started, release))
    holder.start()
    assert started.wait(10)
    timers = [threading.Timer(10, let_go), threading.Timer(1, let_go)]
    try:
        with db.engine(app).connect() as conn:
            timers[0].start()  # were the other key to wait, it would end in 10 s
            dialect.lock_keys(conn, [11])
            timers[0].cancel()
            other_key_waited = bool(released)
            timers[1].start()
            dialect.lock_keys(conn, [3])
            same_key_at = time.monotonic()
            conn.rollback()
    finally:
        for timer in timers:
            timer.cancel()
        release.set()
        holder.join()
    assert not other_key_waited
    if dialect.locks_rows:
        assert released and same_key_at >= released[0]  # taken once the first let it go
    else:
        assert not released or same_key_at < released[0]


def test_led_by_items_finds_the_same_rows(app: Flask, dialect: Dialect, table: Table) -> None:
    columns: Columns = (("id", Kind.BIGINT), ("label", Kind.TEXT))
    items = dialect.items(columns)
    query = (
        select(table.c.id, items.c.label)
        .select_from(items)
        .join(table, table.c.id == items.c.id)
        .where(dialect.led_by_items(table.c.label) != "row 2")
        .order_by(items.c.position)
    )
    rows = [
        {"id": 9, "label": "nine"}, {"id": 2, "label": "two"}, {"id": 99, "label": "none"},
        {"id": 1, "label": "one"},
    ]  # fmt: skip
    with db.engine(app).connect() as conn:
        got = conn.execute(query, {"items": parameter(columns, rows)}).all()
    assert [tuple(row) for row in got] == [(9, "nine"), (1, "one")]
