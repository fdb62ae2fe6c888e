"""The app's database: its engine, transactions and announcer built once (``app.storage``), and
the transaction helpers views use, which run the request's gate (the JSON API authenticates its
caller in the transaction of the work) before anything else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from flask import Flask, current_app, g, has_request_context
from sqlalchemy import Connection, Engine

from app.storage import databases, outcomes
from app.storage.databases.write_groups import WriterTurns
from app.storage.transactions import Announcer, Gate, Transactions

EXTENSION_KEY = "queuelog.db"
_GATE = "queuelog_transaction_gate"


def init_app(app: Flask) -> None:
    """Build the app's database handles and keep them in ``app.extensions``."""
    database = databases.for_url(app.config["DATABASE_URL"])
    busy_timeout_ms = app.config["SQLITE_BUSY_TIMEOUT_MS"]
    engine = database.make_engine(
        synchronous=app.config["SQLITE_SYNCHRONOUS"], busy_timeout_ms=busy_timeout_ms
    )
    writers = WriterTurns(engine, busy_timeout_ms / 1000, take_turns=database.writers_take_turns)
    announcer = Announcer(database, outcomes.Outcomes(database))
    app.extensions[EXTENSION_KEY] = Transactions(engine, writers, announcer)


def transactions(app: Flask | None = None) -> Transactions:
    """The transactions of ``app`` (or the current app)."""
    return (app or current_app).extensions[EXTENSION_KEY]  # type: ignore[no-any-return]


def engine(app: Flask | None = None) -> Engine:
    """SQLAlchemy's engine of ``app`` (or the current app)."""
    return transactions(app).engine


def close(app: Flask) -> None:
    """Close the database of ``app``: its listeners, threads and pooled connections (tests,
    commands that made an app of their own)."""
    transactions(app).close()


def announcer(app: Flask | None = None) -> Announcer:
    """Who tells waiters what the writes of ``app`` (or the current app) did."""
    return transactions(app).announcer


def outcomes_of(app: Flask | None = None) -> outcomes.Outcomes:
    """What requests waiting for a job's outcome of ``app`` (or the current app) sleep on."""
    return announcer(app).outcomes


def gate_transactions(check: Gate) -> None:
    """For the rest of this request, every transaction runs ``check(conn, writable)`` before
    anything else (the JSON API authenticates its caller so, in the transaction of the work)."""
    setattr(g, _GATE, check)


def _gate() -> Gate | None:
    return g.get(_GATE) if has_request_context() else None


@contextmanager
def transaction(app: Flask | None = None) -> Iterator[Connection]:
    """A write transaction (``Transactions.write``) behind the request's gate; what the block
    ``announce``s is told to waiters once it commits."""
    with transactions(app).write(_gate()) as conn:
        yield conn


@contextmanager
def read(app: Flask | None = None) -> Iterator[Connection]:
    """A read-only transaction behind the request's gate."""
    with transactions(app).read(_gate()) as conn:
        yield conn
