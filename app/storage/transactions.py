"""A process's transactions on its database, without Flask: writes (whose writers take turns and
share commits where the database has one writer at a time, ``databases.write_groups``), reads,
and what a write tells the waiters once it has committed.

A use case that moves jobs returns what that means to waiters (``Effects``); the code that owns
the transaction hands it to ``announce`` inside the block. When the transaction commits, this
process's waiting claims are served directly and the requests waiting for an outcome woken
(``Announcer``); the other processes are told only what this one cannot serve itself, by the
database's own way (``app.storage.wakeup``), which names one of the processes that have waiters
to claim the jobs where it can.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import reduce
from typing import Protocol

from sqlalchemy import Connection, Engine

from app.queue.vocabulary.effects import NOTHING, Effects
from app.storage import databases
from app.storage.databases.write_groups import WriterTurns
from app.storage.outcomes import Outcomes
from app.storage.wakeup import Addressee

# Runs first in each transaction of a request, with whether it may write (the JSON API
# authenticates its caller so, in the transaction of the work).
Gate = Callable[[Connection, bool], None]
# What the write transaction under way announced, read when it commits.
_announced: ContextVar[list[Effects] | None] = ContextVar("queuelog_announced", default=None)


def announce(effects: Effects) -> None:
    """Tell the waiters what the write transaction under way did, once it commits (a rolled
    back transaction tells nothing)."""
    pending = _announced.get()
    if pending is None:
        raise RuntimeError("announce is for a write transaction, inside its block")
    pending.append(effects)


class Waiters(Protocol):
    """This process's waiting claims, as the announcer sees them (``app.api.dispatcher``)."""

    def capacity(self, due: Sequence[str]) -> int:
        """How many more jobs of the types ``due`` lists (one entry per job) they would take
        now, besides the jobs announced to them already and not claimed yet."""

    def serve(self, effects: Effects) -> None:
        """Jobs became claimable (or will, at ``effects.next_at``): hand them out."""

    def close(self) -> None:
        """Stop serving (tests and shutdown)."""


class _NoWaiters:
    """A process that serves no waiting claims (the CLI, a test's app)."""

    def capacity(self, due: Sequence[str]) -> int:
        return 0

    def serve(self, effects: Effects) -> None:
        return None

    def close(self) -> None:
        return None


def encode(effects: Effects) -> str:
    """The body of a ``wake`` message: the due jobs' types, the next instant, "everything"."""
    body: dict[str, object] = {}
    if effects.due:
        body["due"] = list(effects.due)
    if effects.next_at is not None:
        body["at"] = effects.next_at.timestamp()
    if effects.any_due:
        body["any"] = 1
    return json.dumps(body, separators=(",", ":"))


def decode(body: str) -> Effects:
    """What a ``wake`` message's body says ("" or anything unreadable: anything may be due)."""
    try:
        found = json.loads(body)
        due = tuple(str(t) for t in found.get("due", ()))
        at = found.get("at")
        next_at = datetime.fromtimestamp(float(at), UTC) if at is not None else None
        return Effects(due=due, next_at=next_at, any_due=bool(found.get("any")))
    except (ValueError, TypeError, AttributeError, OverflowError):
        return Effects(any_due=True)


class Announcer:
    """Tells waiters what committed writes did: this process's waiting claims (``waiters``)
    and its outcome watchers directly, the other processes what this one cannot serve."""

    def __init__(self, database: databases.Database, outcomes: Outcomes) -> None:
        self.waiters: Waiters = _NoWaiters()
        self.outcomes = outcomes
        self.wake = database.wakeup("wake", self._heard)

    def _heard(self, message: str) -> None:
        body = self.wake.received(message)
        if body is None:
            return
        addressee = self.wake.addressee(message)
        if addressee is Addressee.ANOTHER:
            return  # another process claims them (this one's waiters trust it for a while)
        effects = decode(body)
        if addressee is Addressee.THIS_ONE and (left := self.for_others(effects)):
            self.wake.after_commit(self.wake.addressed(encode(left)))  # to everyone
        self.waiters.serve(effects)

    def for_others(self, effects: Effects) -> Effects:
        """What the other processes must hear of ``effects``: the jobs this process's waiters
        cannot take (every due job, when they cannot take them all: who takes which is the
        claims' race), the next instant (their timers), and any change of limits."""
        due = effects.due if len(effects.due) > self.waiters.capacity(effects.due) else ()
        return Effects(due=due, next_at=effects.next_at, any_due=effects.any_due)

    def _addressed(self, others: Effects) -> str:
        """The message telling the others ``others``: jobs made due and nothing else are for
        one waiting process to claim (where the way can name one), which passes on to everyone
        what its own waiters cannot take."""
        to_one = not (others.next_at or others.any_due)
        return self.wake.addressed(encode(others), to_one=to_one)

    def before_commit(self, conn: Connection, effects: Effects) -> tuple[str, str]:
        """Send what must go inside the transaction; the messages, for ``after_commit``."""
        others = self.for_others(effects)
        wake = self._addressed(others) if others else ""
        if wake:
            self.wake.in_transaction(conn, wake)
        done = self.outcomes.before_commit(conn, effects.finished) if effects.finished else ""
        return wake, done

    def after_commit(self, effects: Effects, sent: tuple[str, str]) -> None:
        """The transaction committed: send what the database's way sends after a commit, serve
        this process's waiters, and wake its watchers. Due jobs that another process was named
        to claim are that process's (it passes on what its waiters cannot take): this one keeps
        what it knows, as when it hears jobs named to another, so that its claims do not race
        the named one for them and find nothing."""
        wake, done = sent
        named = bool(wake) and self.wake.after_commit(wake)
        if not named and (effects.due or effects.next_at or effects.any_due):
            self.waiters.serve(effects)
        if done:
            self.outcomes.after_commit(done)

    def close(self) -> None:
        """Stop serving and listening (tests and shutdown)."""
        self.waiters.close()
        self.wake.close()
        self.outcomes.close()


class Transactions:
    """The write and read transactions of one database in this process."""

    def __init__(self, engine: Engine, writers: WriterTurns, announcer: Announcer) -> None:
        self.engine = engine
        self.writers = writers
        self.announcer = announcer
        self._users: list[Callable[[], None]] = []  # how to stop the threads that use it

    def used_by(self, stop: Callable[[], None]) -> None:
        """A thread of this process uses the database: ``close`` stops it (``stop`` returns once
        it no longer does) before closing the connections."""
        self._users.append(stop)

    @contextmanager
    def write(self, gate: Gate | None = None) -> Iterator[Connection]:
        """A write transaction: committed when the block ends, rolled back if it raises (except
        for a refusal that ``keeps_transaction``: it is raised after the commit). What the
        block ``announce``d is told once it has committed."""
        pending: list[Effects] = []
        token = _announced.set(pending)
        try:
            with self.writers.write() as conn:
                kept: Exception | None = None
                if gate is not None:
                    gate(conn, True)
                try:
                    yield conn
                except Exception as exc:
                    if not getattr(exc, "keeps_transaction", False):
                        raise
                    kept = exc  # a refusal that reports what this transaction did: commit it
                    if (did := getattr(exc, "effects", None)) is not None:
                        pending.append(did)
                effects = reduce(Effects.__or__, pending, NOTHING)
                sent = self.announcer.before_commit(conn, effects) if effects else ("", "")
        finally:
            _announced.reset(token)
        if effects:
            self.announcer.after_commit(effects, sent)
        if kept is not None:
            raise kept

    def close(self) -> None:
        """Stop the threads that use the database and the announcer's listeners, then close
        every pooled connection."""
        for stop in self._users:
            stop()
        self.announcer.close()
        self.engine.dispose()

    @contextmanager
    def read(self, gate: Gate | None = None) -> Iterator[Connection]:
        """A read-only transaction: where writers take turns, it does not take the write lock."""
        with self.engine.connect() as conn:
            conn.info[databases.READ_ONLY] = True  # for the BEGIN, which takes it back
            with conn.begin():
                if gate is not None:
                    gate(conn, False)
                yield conn
