"""SQLite: a file in WAL mode with a busy timeout, where every write transaction starts with
``BEGIN IMMEDIATE`` so two writers never deadlock on a lock upgrade, and processes wake each
other by datagrams (``app.storage.databases.datagrams``).

SQLite's own wait for the write lock sleeps 1, 2, 5, 10... ms between tries, while a write
holds it for well under a millisecond, so a waiting writer would mostly sleep past a free lock:
instead the writers of a process take turns on a lock of their own (and share a transaction
when several wait: ``app.storage.databases.write_groups``), and the one whose turn it is asks SQLite
again after 50 us, doubling to 1 ms, until the busy timeout.

A new file gets 1 KiB pages rather than SQLite's 4 KiB: a commit appends every page it changed
to the WAL and syncs it, and an enqueue or a claim changes a dozen pages (its row, each index's
entry, the counters) by a few dozen bytes each, so smaller pages mean about a third of the
bytes written and synced per commit (an enqueue: 15.7 pages of 1 KiB against 12.3 of 4 KiB),
and checkpoints copy less too. A file made with other pages keeps them (SQLite changes a page
size only by ``VACUUM`` outside WAL mode).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from app.storage.databases import READ_ONLY, Database
from app.storage.databases.datagrams import SocketWakeup
from app.storage.wakeup import Hear, Wakeup

PAGE_SIZE = 1024  # bytes per page of a new file
FIRST_PAUSE, LONGEST_PAUSE = 0.000_05, 0.001  # seconds between two tries for the write lock
SYNCHRONOUS = frozenset({"FULL", "NORMAL", "EXTRA"})


class SQLiteDatabase(Database):
    writers_take_turns = True

    def make_engine(self, *, synchronous: str, busy_timeout_ms: int) -> Engine:
        if synchronous.upper() not in SYNCHRONOUS:
            raise ValueError("SQLITE_SYNCHRONOUS must be FULL, NORMAL or EXTRA")
        database = make_url(self.url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(self.url, connect_args={"timeout": busy_timeout_ms / 1000})

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
            if dbapi_connection.info.pop(READ_ONLY, False):
                dbapi_connection.driver_connection.execute("BEGIN")
            else:
                begin_writing(dbapi_connection.driver_connection, busy_timeout_ms / 1000)

        # The dialect's own hook rather than a "begin" event: with any connection event
        # listening, every Connection of the engine builds joined event dispatchers and consults
        # them on each execute, commit and close (an empty read transaction took 104 us with
        # one, 36 us without).
        engine.dialect.do_begin = begin  # type: ignore[method-assign]
        return engine

    def wakeup(self, topic: str, hear: Hear | None = None) -> Wakeup:
        database = make_url(self.url).database
        if database in (None, "", ":memory:"):
            return Wakeup(hear)  # no other process can open it
        return SocketWakeup(Path(f"{database}.{topic}"), hear)


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
