"""Waiting for a job's outcome: requests sleep until a commit in any process or app server
finishes the job they watch (``GET /jobs/{id}?wait_seconds=N``), holding no connection.

A transaction that finishes jobs (completed, failed or cancelled) sends their ids on the
``done`` topic of the database's wake-ups (``app.storage.databases``), separate from the claims'
ones: a finish wakes only the requests watching one of its jobs, and a claim is never woken by a
finish. Nothing here knows about Flask; ``app/infra/db.py`` binds it to the app.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Iterator

from sqlalchemy import Connection

from app.storage import wakeup
from app.storage.databases import Database

TOPIC = "done"
Seen = tuple[int, int]  # (rings of the watched job, rings for everyone)


class Watch:
    """This process's watched jobs: per job id, how many requests watch it and how many
    times a finish of it was heard."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._watched: dict[int, list[int]] = {}  # job id -> [watchers, rings]
        self._everyone = 0  # messages that named no job (a listener reconnected, a huge batch)

    def _seen(self, job_id: int) -> Seen:
        entry = self._watched.get(job_id)
        return (entry[1] if entry else 0, self._everyone)

    @contextlib.contextmanager
    def watching(self, job_id: int) -> Iterator[None]:
        """Watch ``job_id`` for the block (only watched jobs' rings are counted)."""
        with self._condition:
            self._watched.setdefault(job_id, [0, 0])[0] += 1
        try:
            yield
        finally:
            with self._condition:
                entry = self._watched[job_id]
                entry[0] -= 1
                if not entry[0]:
                    del self._watched[job_id]

    def seen(self, job_id: int) -> Seen:
        """What was heard of ``job_id`` so far: read it before reading the job, then ``wait``."""
        with self._condition:
            return self._seen(job_id)

    def finished(self, body: str) -> None:
        """Jobs finished: ``body`` lists their ids, comma-separated ("" for any job)."""
        ids = [int(part) for part in body.split(",") if part.isascii() and part.isdigit()]
        with self._condition:
            if not ids:
                self._everyone += 1
            elif not any(job_id in self._watched for job_id in ids):
                return
            for job_id in ids:
                if (entry := self._watched.get(job_id)) is not None:
                    entry[1] += 1
            self._condition.notify_all()

    def wait(self, job_id: int, seen: Seen, timeout: float) -> bool:
        """Sleep until ``job_id`` may have finished since ``seen``, or ``timeout``."""
        with self._condition:
            return self._condition.wait_for(lambda: self._seen(job_id) != seen, max(timeout, 0))


def message(job_ids: Collection[int]) -> str:
    """The body of the ``done`` message naming ``job_ids`` ("" when too long: it then wakes
    everyone)."""
    text = ",".join(str(job_id) for job_id in sorted(job_ids))
    return text if len(text) <= wakeup.MAX_MESSAGE - 40 else ""


class Outcomes:
    """The watch of this process and the transport that fills it."""

    def __init__(self, database: Database) -> None:
        self.watch = Watch()
        self.transport = database.wakeup(TOPIC, self._heard)

    def _heard(self, message: str) -> None:
        body = self.transport.received(message)
        if body is not None:
            self.watch.finished(body)

    def before_commit(self, conn: Connection, job_ids: Collection[int]) -> str:
        """Tell the other processes that ``job_ids`` finish with this transaction; the message,
        for ``after_commit``."""
        sent = self.transport.addressed(message(job_ids))
        self.transport.in_transaction(conn, sent)
        return sent

    def after_commit(self, sent: str) -> None:
        """The transaction committed: wake this process's watchers, and the others' where the
        database's way sends after the commit."""
        self.watch.finished(wakeup.body_of(sent))
        self.transport.after_commit(sent)

    def seen(self, job_id: int) -> Seen:
        """Start listening (so no later finish is missed), then what was heard of ``job_id``."""
        self.transport.listening()
        return self.watch.seen(job_id)

    def wait(self, job_id: int, seen: Seen, timeout: float) -> bool:
        """Sleep until woken for ``job_id`` or ``timeout``; shorter while the listener is down."""
        if not self.transport.listening():
            timeout = min(timeout, wakeup.FALLBACK_POLL_SECONDS)
        return self.watch.wait(job_id, seen, timeout)

    def close(self) -> None:
        """Stop listening (tests and shutdown)."""
        self.transport.close()
