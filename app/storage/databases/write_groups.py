"""SQLite's write transactions of one process: taken in turns, committed in groups.

SQLite lets one transaction write at a time, and at ``synchronous=FULL`` each commit syncs the
WAL to disk: an enqueue spends about as long committing as doing its work, all of it holding
the database's write lock. So when several requests of a process want to write at once, they
share one transaction instead of queueing for a commit each (group commit, as databases do with
their own logs):

- the first writer begins the transaction (``BEGIN IMMEDIATE``) and does its work;
- when it is done and another writer of the process is waiting for its turn, it leaves the
  transaction open and hands the turn over; the next writer does its work in a savepoint of
  its own, so its failure rolls back its work alone;
- the writer that finds no one waiting (or the group full) commits everyone's work at once.

Each writer still returns only once the commit that holds its work has succeeded, and raises if
it failed: a request answers success only for work that is on disk, as before. What a writer
sees is what it would see in turn: the work of those before it, nothing after. A group is at
most ``MAX_GROUP`` writers, so the write lock is never held long against other processes.

A database whose writers run at once (PostgreSQL) is served with ``take_turns`` false: each
writer has its own transaction, no turns, no groups.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, NestedTransaction, RootTransaction
from sqlalchemy.exc import OperationalError

MAX_GROUP = 8  # writers whose work one commit may hold
# How long a writer that handed its transaction over waits before it makes sure, itself, that
# the transaction gets committed (the writer it counted on may have given up waiting).
HANDOVER_GRACE = 0.1


class GroupFailed(OperationalError):
    """The transaction that held a writer's work did not commit (raised in each of its writers,
    so the app answers as for any database failure)."""


class _Group:
    """One open write transaction and the writers whose work it holds."""

    def __init__(self, conn: Connection, root: RootTransaction) -> None:
        self.conn = conn
        self.root = root
        self.members = 1
        self.done = threading.Event()
        self.failure: BaseException | None = None

    def end(self) -> None:
        """Commit the group's work (or roll it back, once it has failed) and tell its writers."""
        try:
            if self.failure is None:
                self.root.commit()
        except BaseException as exc:  # every writer of the group learns it, then it propagates
            self.failure = exc
            raise
        finally:
            try:
                if self.root.is_active:
                    self.root.rollback()
                self.conn.close()
            finally:
                self.done.set()

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise GroupFailed("COMMIT", (), self.failure) from self.failure


class WriterTurns:
    """The write transactions of one process (see the module's docstring). Threads waiting for
    a turn sleep on a lock until woken; only the one whose turn it is asks SQLite for its lock,
    and only when it begins a group. The turn is given up after ``busy_timeout`` seconds:
    SQLite's own lock then decides, as it always does."""

    def __init__(self, engine: Engine, busy_timeout: float, *, take_turns: bool) -> None:
        self.engine = engine
        self.busy_timeout = busy_timeout
        self._turn = threading.Lock() if take_turns else None
        self._counting = threading.Lock()
        self._waiting = 0  # threads waiting for the turn
        self._group: _Group | None = None  # the transaction handed from writer to writer
        self._holder = threading.local()

    @property
    def waiting(self) -> int:
        """How many threads of this process wait for their turn to write."""
        return self._waiting

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A connection in a write transaction; when the block ends without raising, its work
        has been committed (perhaps with other writers' work)."""
        if self._turn is None or getattr(self._holder, "turn", False) or not self._take_turn():
            # PostgreSQL, a write nested in a write of this thread (SQLite's lock refuses it
            # after the busy timeout), or no turn within the busy timeout: a transaction alone.
            with self.engine.connect() as conn, conn.begin():
                yield conn
            return
        self._holder.turn = True
        try:
            group, savepoint = self._join()
            try:
                yield group.conn
                if savepoint is not None:
                    savepoint.commit()
            except BaseException as exc:
                self._undo(group, savepoint, exc)
                raise
            handed_over = self._waiting > 0 and group.members < MAX_GROUP
            if not handed_over:
                self._group = None
                group.end()
        finally:
            self._holder.turn = False
            self._turn.release()
        if handed_over:
            self._see_committed(group)
        group.raise_failure()

    def _take_turn(self) -> bool:
        assert self._turn is not None
        with self._counting:
            self._waiting += 1
        try:
            return self._turn.acquire(timeout=self.busy_timeout)
        finally:
            with self._counting:
                self._waiting -= 1

    def _join(self) -> tuple[_Group, NestedTransaction | None]:
        """The open group with a savepoint of this writer's own, or a new group (whose first
        writer needs no savepoint: a failure rolls back the transaction, which holds only its
        work)."""
        group = self._group
        if group is not None:
            group.members += 1
            return group, group.conn.begin_nested()
        conn = self.engine.connect()
        try:
            root = conn.begin()
        except BaseException:
            conn.close()
            raise
        self._group = _Group(conn, root)
        return self._group, None

    def _undo(self, group: _Group, savepoint: NestedTransaction | None, exc: BaseException) -> None:
        """Roll back this writer's work: its savepoint, or the whole transaction if it was the
        first writer or if SQLite already ended the transaction (the others then fail too)."""
        if savepoint is not None and _still_open(group.conn):
            savepoint.rollback()
            return
        group.failure = exc
        self._group = None
        group.end()

    def _see_committed(self, group: _Group) -> None:
        """Wait for the commit of the group this writer handed over. Whoever holds the turn
        meanwhile commits the group or hands it on; if the turn is free and the group still
        open after ``HANDOVER_GRACE`` (the writer it counted on gave up), commit it here."""
        assert self._turn is not None
        while not group.done.wait(HANDOVER_GRACE):
            if not self._turn.acquire(blocking=False):
                continue  # its holder commits the group, or it was committed already
            try:
                if self._group is group:
                    self._group = None
                    group.end()
            finally:
                self._turn.release()


def _still_open(conn: Connection) -> bool:
    """Whether SQLite still holds the transaction (some errors, such as a full disk, make it
    roll the whole transaction back, savepoints and all)."""
    return bool(conn.connection.driver_connection.in_transaction)  # type: ignore[union-attr]
