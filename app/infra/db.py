"""One SQLAlchemy engine per app, built as its database needs (``app.storage.databases``), and the
transaction helpers views use: a write transaction (whose writers may take turns and share a
commit, ``app.storage.databases.write_groups``) that wakes waiting claims once it commits, and a
read-only one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from flask import Flask, current_app, g, has_request_context
from sqlalchemy import Connection, Engine

from app.storage import databases, outcomes, wakeup
from app.storage.databases.write_groups import WriterTurns

EXTENSION_KEY = "queuelog.db"
WAKEUP_KEY = "queuelog.wakeup"
OUTCOMES_KEY = "queuelog.outcomes"
WRITERS_KEY = "queuelog.writers"
_GATE = "queuelog_transaction_gate"
Gate = Callable[[Connection, bool], None]


def init_app(app: Flask) -> None:
    """Create the app's engine and keep it in ``app.extensions``."""
    database = databases.for_url(app.config["DATABASE_URL"])
    busy_timeout_ms = app.config["SQLITE_BUSY_TIMEOUT_MS"]
    app.extensions[EXTENSION_KEY] = database.make_engine(
        synchronous=app.config["SQLITE_SYNCHRONOUS"], busy_timeout_ms=busy_timeout_ms
    )
    app.extensions[WAKEUP_KEY] = database.wakeup("wake")
    app.extensions[OUTCOMES_KEY] = outcomes.Outcomes(database)
    app.extensions[WRITERS_KEY] = WriterTurns(
        app.extensions[EXTENSION_KEY],
        busy_timeout_ms / 1000,
        take_turns=database.writers_take_turns,
    )


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
    claims in every process are woken by the database's way (told just before the commit, so
    a notification sent in the transaction is delivered only if it commits, and again after
    it). Requests waiting for the outcome of a job it finished (``JOB_DONE``) are woken the same
    way, on their own topic.
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
    """A read-only transaction: where writers take turns, it does not take the write lock."""
    with engine(app).connect() as conn:
        conn.info[databases.READ_ONLY] = True  # for the BEGIN, which takes it back
        with conn.begin():
            _gate(conn, writable=False)
            yield conn
