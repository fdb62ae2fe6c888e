"""Wake-ups across processes and app servers: commits that make a job due ring waiting claims.

Each process has one ``Bell`` (a generation counter under a condition) that its waiting requests
sleep on, and one listener thread that rings it when another process says a job became due. How
processes reach each other is the database's own way (``app.storage.databases``: a notification
sent by the writing transaction, or a datagram to each waiting process's socket beside the database
file); this module holds what every way shares and ``Wakeup``, the in-process one they extend.

Nothing here knows about Flask; ``app/infra/db.py`` binds it to the app's transactions, and the
statements that make a job due mark their connection with ``JOB_DUE``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

from sqlalchemy import Connection

# Set in a connection's info by a statement that made a job due: ``app/infra/db.py``'s transaction
# helper rings once that transaction commits.
JOB_DUE = "queuelog_wake"
# Likewise the ids of the jobs a statement finished: requests waiting for their outcome wake.
JOB_DONE = "queuelog_done"
# A message names what happened (e.g. the ids of the jobs that finished); "" says "anything".
# A longer one goes as "": a notification's payload holds under 8,000 bytes.
MAX_MESSAGE = 7900
Hear = Callable[[str], None]
# While a listener is down, waiters look again this often so nothing due is missed for long.
FALLBACK_POLL_SECONDS = 0.5


class Bell:
    """A generation counter: ``ring()`` wakes everyone waiting on a generation already seen."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._generation = 0

    def generation(self) -> int:
        """The current generation; read it before looking for work, then ``wait`` on it."""
        with self._condition:
            return self._generation

    def ring(self) -> None:
        """Wake every waiter."""
        with self._condition:
            self._generation += 1
            self._condition.notify_all()

    def wait(self, seen: int, timeout: float) -> bool:
        """Sleep until a ring after generation ``seen`` or ``timeout``; True when rung."""
        with self._condition:
            return self._condition.wait_for(lambda: self._generation != seen, max(timeout, 0))


class Turn:
    """Waiters of one kind that the same ring woke take turns to look (``gate``); one that
    finds nothing leaves a note, so the others need not look again before the next ring: a ring
    then costs a process one or two looks, however many of its waiters sleep."""

    def __init__(self) -> None:
        self.gate = threading.Lock()
        self._lock = threading.Lock()
        self._empty_at = -1
        self._note: object = None

    def found_nothing(self, generation: int, note: object) -> None:
        """A look that began at ``generation`` found nothing; ``note`` is what else it learned."""
        with self._lock:
            if generation >= self._empty_at:
                self._empty_at, self._note = generation, note

    def nothing_since(self, generation: int) -> tuple[bool, object]:
        """Whether a look that began at ``generation`` or later found nothing, and its note."""
        with self._lock:
            return self._empty_at >= generation, self._note


class Wakeup:
    """In-process only (a database no other process opens): commits ring this process's bell.
    ``hear`` receives each message instead, when given (by default any message rings the bell)."""

    def __init__(self, hear: Hear | None = None) -> None:
        self.bell = Bell()
        self.hear: Hear = hear or (lambda _message: self.bell.ring())
        self._turns: dict[Hashable, Turn] = {}
        self._turns_lock = threading.Lock()

    def turn(self, kind: Hashable) -> Turn:
        """This process's turn for waiters of ``kind``."""
        with self._turns_lock:
            return self._turns.setdefault(kind, Turn())

    def listening(self) -> bool:
        """Start this process's listener if needed; True when no wake-up can be missed."""
        return True

    def generation(self) -> int:
        """Start listening, then return the bell's generation (read it before looking for work)."""
        self.listening()
        return self.bell.generation()

    def wait(self, seen: int, timeout: float) -> bool:
        """Sleep until woken or ``timeout``; shorter while the listener is down."""
        if not self.listening():
            timeout = min(timeout, FALLBACK_POLL_SECONDS)
        return self.bell.wait(seen, timeout)

    def in_transaction(self, conn: Connection, message: str = "") -> None:
        """Called inside a transaction that made a job due, just before it commits."""

    def after_commit(self, message: str = "") -> None:
        """Called after that transaction committed."""
        self.hear(message)

    def close(self) -> None:
        """Stop listening (tests and shutdown)."""
