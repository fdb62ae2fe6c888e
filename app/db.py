"""One SQLAlchemy engine per app, tuned per backend, and the transaction helpers views use.

SQLite runs in WAL mode with a busy timeout, and every write transaction starts with
``BEGIN IMMEDIATE`` so two writers never deadlock on a lock upgrade. SQLite's own wait for that
lock sleeps 1, 2, 5, 10... ms between tries, while a write holds it for well under a
millisecond, so a waiting writer would mostly sleep past a free lock: instead the writers of a
process take turns on a lock of their own (and share a transaction when several wait: see
``app.write_groups``), and the one whose turn it is asks SQLite again after 50 us, doubling to
1 ms, until the busy timeout.

A new SQLite file gets 1 KiB pages rather than SQLite's 4 KiB: a commit appends every page it
changed to the WAL and syncs it, and an enqueue or a claim changes a dozen pages (its row, each
index's entry, the counters) by a few dozen bytes each, so smaller pages mean about a third of
the bytes written and synced per commit (an enqueue: 15.7 pages of 1 KiB against 12.3 of 4 KiB),
and checkpoints copy less too. A file made with other pages keeps them (SQLite changes a page
size only by ``VACUUM`` outside WAL mode).

PostgreSQL uses the default READ COMMITTED isolation; the claim relies on
``FOR UPDATE SKIP LOCKED``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flask import Flask, current_app, g, has_request_context
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from app import outcomes, wakeup
from app.write_groups import WriterTurns

EXTENSION_KEY = "queuelog.db"
WAKEUP_KEY = "queuelog.wakeup"
OUTCOMES_KEY = "queuelog.outcomes"
WRITERS_KEY = "queuelog.writers"
PAGE_SIZE = 1024  # bytes per page of a new SQLite file
FIRST_PAUSE, LONGEST_PAUSE = 0.000_05, 0.001  # seconds between two tries for the write lock
_READ_ONLY = "queuelog_read_only"  # in a connection's info: BEGIN, not BEGIN IMMEDIATE
_GATE = "queuelog_transaction_gate"
Gate = Callable[[Connection, bool], None]


def init_app(app: Flask) -> None:
    """Create the app's engine and keep it in ``app.extensions``."""
    app.extensions[EXTENSION_KEY] = make_engine(
        app.config["DATABASE_URL"],
        synchronous=app.config["SQLITE_SYNCHRONOUS"],
        busy_timeout_ms=app.config["SQLITE_BUSY_TIMEOUT_MS"],
    )
    app.extensions[WAKEUP_KEY] = wakeup.for_database(app.config["DATABASE_URL"])
    app.extensions[OUTCOMES_KEY] = outcomes.Outcomes(app.config["DATABASE_URL"])
    app.extensions[WRITERS_KEY] = WriterTurns(
        app.extensions[EXTENSION_KEY], app.config["SQLITE_BUSY_TIMEOUT_MS"] / 1000
    )


def make_engine(url: str, *, synchronous: str = "FULL", busy_timeout_ms: int = 10_000) -> Engine:
    """Build an engine for ``url`` with the pragmas or pool settings queuelog relies on."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, future=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    if synchronous.upper() not in {"FULL", "NORMAL", "EXTRA"}:
        raise ValueError("SQLITE_SYNCHRONOUS must be FULL, NORMAL or EXTRA")
    engine = create_engine(url, connect_args={"timeout": busy_timeout_ms / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's begin event issues BEGIN
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA page_size={PAGE_SIZE}")  # takes effect on a new file only
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous.upper()}")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    def begin(dbapi_connection: Any) -> None:
        """SQLAlchemy's BEGIN on this engine (pysqlite itself would issue none)."""
        if dbapi_connection.info.pop(_READ_ONLY, False):
            dbapi_connection.driver_connection.execute("BEGIN")
        else:
            begin_writing(dbapi_connection.driver_connection, busy_timeout_ms / 1000)

    # The dialect's own hook rather than a "begin" event: with any connection event listening,
    # every Connection of the engine builds joined event dispatchers and consults them on each
    # execute, commit and close (an empty read transaction took 104 us with one, 36 us without).
    engine.dialect.do_begin = begin  # type: ignore[method-assign]
    return engine


def begin_writing(driver: sqlite3.Connection, busy_timeout: float) -> None:
    """``BEGIN IMMEDIATE``, asking again after short pauses while another writer holds the
    lock; after ``busy_timeout`` seconds the busy error (a 503) is raised."""
    deadline = time.monotonic() + busy_timeout
    pause = FIRST_PAUSE
    driver.execute("PRAGMA busy_timeout=0")  # each try answers at once
    try:
        while True:
            try:
                driver.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise OperationalError("BEGIN IMMEDIATE", (), exc) from None
            time.sleep(pause)
            pause = min(pause * 2, LONGEST_PAUSE)
    finally:
        driver.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")


def engine(app: Flask | None = None) -> Engine:
    """Return the engine bound to ``app`` (or the current app)."""
    return (app or current_app).extensions[EXTENSION_KEY]  # type: ignore[no-any-return]


def wakeups(app: Flask | None = None) -> wakeup.Wakeup:
    """The wake-up mechanism long-polling claims of ``app`` (or the current app) sleep on."""
    return (app or current_app).extensions[WAKEUP_KEY]  # type: ignore[no-any-return]


def outcomes_of(app: Flask | None = None) -> outcomes.Outcomes:
    """What requests waiting for a job's outcome of ``app`` (or the current app) sleep on."""
    return (app or current_app).extensions[OUTCOMES_KEY]  # type: ignore[no-any-return]


def gate_transactions(check: Gate) -> None:
    """For the rest of this request, every transaction runs ``check(conn, writable)`` before
    anything else (the JSON API authenticates its caller so, in the transaction of the work)."""
    setattr(g, _GATE, check)


def _gate(conn: Connection, *, writable: bool) -> None:
    check: Gate | None = g.get(_GATE) if has_request_context() else None
    if check is not None:
        check(conn, writable)


@contextmanager
def transaction(app: Flask | None = None) -> Iterator[Connection]:
    """A write transaction: committed when the block ends, rolled back if it raises (except
    for a refusal that ``keeps_transaction``: it is raised after the commit).

    When the block made a job due (the store sets ``JOB_DUE`` in the connection's info), waiting
    claims in every process are woken: by NOTIFY inside the transaction on PostgreSQL (delivered
    only if it commits), after the commit on SQLite. Requests waiting for the outcome of a job
    it finished (``JOB_DONE``) are woken the same way, on their own topic.
    """
    bell, done_bell = wakeups(app), outcomes_of(app).transport
    writers: WriterTurns = (app or current_app).extensions[WRITERS_KEY]
    with writers.write() as conn:
        conn.info.pop(wakeup.JOB_DUE, None)  # info lives with the pooled connection: start clean
        conn.info.pop(wakeup.JOB_DONE, None)
        kept: Exception | None = None
        _gate(conn, writable=True)
        try:
            yield conn
        except Exception as exc:
            if not getattr(exc, "keeps_transaction", False):
                raise
            kept = exc  # a refusal that reports what this transaction did: commit it
        due = conn.info.pop(wakeup.JOB_DUE, False)
        if due:
            bell.in_transaction(conn)
        finished = conn.info.pop(wakeup.JOB_DONE, None)
        if finished:
            done_bell.in_transaction(conn, outcomes.message(finished))
    if due:
        bell.after_commit()
    if finished:
        done_bell.after_commit(outcomes.message(finished))
    if kept is not None:
        raise kept


@contextmanager
def read(app: Flask | None = None) -> Iterator[Connection]:
    """A read-only transaction; on SQLite it does not take the write lock."""
    with engine(app).connect() as conn:
        conn.info[_READ_ONLY] = True  # for the BEGIN (``make_engine``), which takes it back
        with conn.begin():
            _gate(conn, writable=False)
            yield conn
