"""Which job types workers asked for lately, for the explainer's ``no_worker_polling``: every
claim notes its types whether it finds a job or not, and each process writes a type's note at
most once per interval (the claim path is hot; an empty long-poll would otherwise write each
time)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import Connection

from app.queue.sql import type_polls as type_polls_sql


class PollNotes:
    """One process's memory of when it last wrote each type's note (the writes it saves). Its
    keys are configured job types, so it stays as small as the configuration."""

    def __init__(self, every: timedelta) -> None:
        self.every = every
        self._written: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def due(self, job_types: Iterable[str], now: datetime) -> list[str]:
        """Of ``job_types``, those this process has not written within ``every`` of ``now``
        (sorted), marked as written at ``now``. A clock that went back writes again."""
        with self._lock:
            due = sorted(name for name in set(job_types) if not self._fresh(name, now))
            for name in due:
                self._written[name] = now
        return due

    def stale(self, job_types: Iterable[str], now: datetime) -> bool:
        """Whether any of ``job_types`` is due a note at ``now`` (nothing marked)."""
        with self._lock:
            return not all(self._fresh(name, now) for name in job_types)

    def _fresh(self, name: str, now: datetime) -> bool:
        written = self._written.get(name)
        return written is not None and now - self.every < written <= now


def note(conn: Connection, notes: PollNotes, job_types: Iterable[str], now: datetime) -> None:
    """Record that a worker asked for ``job_types`` at ``now``, in the claim's transaction;
    ``notes`` skips the types this process wrote lately."""
    due = notes.due(job_types, now)
    if due:
        type_polls_sql.record(conn, due, now)


def last_poll(conn: Connection, job_type: str) -> datetime | None:
    """When a worker last asked for jobs of ``job_type``, as far as the notes know (at most
    one interval behind a worker that keeps asking)."""
    return type_polls_sql.last_poll(conn, job_type)
