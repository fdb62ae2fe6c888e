"""What each database needs of a process, beside the queue's statements
(``app.queue.sql.dialects``): how its SQLAlchemy engine is built (pool, pragmas, how a transaction
begins), how the processes that share it wake each other, and whether a process's writers take
turns. As River's driver hands out its executor and its listener, ``Database`` hands out these,
implemented in ``sqlite`` and ``postgresql``; ``app.infra.db`` and ``app.storage.outcomes`` use them
without asking which database it is. Outside this package, the queue's engines, the schema, the
migrations and the settings (whose default is a SQLite file), no module names a database."""

from __future__ import annotations

from abc import ABC, abstractmethod

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app.storage.wakeup import Hear, Wakeup

# Set in a connection's info before its transaction begins: the transaction only reads (an
# engine whose writers take turns then begins it without asking for the write lock).
READ_ONLY = "queuelog_read_only"


class Database(ABC):
    """One database, at ``url`` (SQLAlchemy's form), and its process-level ways."""

    # Whether one transaction writes at a time, so a process's writers take turns and share
    # commits (``app.storage.databases.write_groups``) instead of each asking the database for
    # its lock.
    writers_take_turns: bool

    def __init__(self, url: str) -> None:
        self.url = url

    @abstractmethod
    def make_engine(self, *, synchronous: str, busy_timeout_ms: int) -> Engine:
        """SQLAlchemy's engine for the database: ``synchronous`` is how durable a commit is (FULL,
        NORMAL or EXTRA) where the database lets a connection choose; a writer waits up to
        ``busy_timeout_ms`` for another's lock before it fails (a 503)."""

    @abstractmethod
    def wakeup(self, topic: str, hear: Hear | None = None) -> Wakeup:
        """How the processes on the database wake each other on ``topic`` ("wake" for claims;
        another topic has its own channel, so its messages reach only its listeners)."""


def for_url(url: str) -> Database:
    """The database ``url`` (SQLAlchemy's form) names; ValueError when it names none queuelog
    runs on. Each implementation is imported only when named: a SQLite deployment loads no
    PostgreSQL driver."""
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        raise ValueError(  # the URL itself is not shown: it may hold a password
            "DATABASE_URL is not a database URL such as sqlite:////path/queuelog.sqlite3 or "
            "postgresql+psycopg://user@host/queuelog"
        ) from None
    if backend == "sqlite":
        from app.storage.databases.sqlite import SQLiteDatabase

        return SQLiteDatabase(url)
    if backend == "postgresql":
        from app.storage.databases.postgresql import PostgreSQLDatabase

        return PostgreSQLDatabase(url)
    raise ValueError(f"DATABASE_URL must name a SQLite or PostgreSQL database, not {backend!r}")
