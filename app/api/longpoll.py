"""The long-polling claim: try, and while nothing is due sleep on the wake-up, holding nothing."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from flask import g

from app import db
from app.queue import due, service
from app.queue.models import Job, QueueSettings
from app.timeutil import utcnow

# Look a little after a due instant: leases count as expired only strictly after their end.
_AFTER_DUE = timedelta(milliseconds=5)


def claim(
    settings: QueueSettings,
    lease: int | None,
    wait_seconds: float,
    *,
    max_jobs: int = 1,
    types: tuple[str, ...] | None = None,
) -> list[Job]:
    """Claim up to ``max_jobs`` due jobs (of ``types``, when given) for the current actor,
    waiting up to ``wait_seconds`` for one.

    Between tries the request holds no connection, transaction or lock: it sleeps on the
    process's wake-up bell until a commit anywhere makes a job due, the next scheduled instant
    (``run_at``, lease end) arrives, or the wait ends.
    """
    deadline = time.monotonic() + wait_seconds
    bell = db.wakeups()
    woken = False
    while True:
        # Read before looking, so a job committed after our look still rings a newer generation.
        seen = bell.generation() if wait_seconds else 0
        now = utcnow()
        claimed: list[Job] = []
        # A commit wakes every waiting claim and most find the job taken: a woken claim first
        # looks without the write lock (SQLite has one for the whole database).
        ready, next_due = _look(now, types) if woken else (True, None)
        if ready:
            with db.transaction() as conn:
                claimed = service.claim_many(
                    conn,
                    g.actor,
                    now=now,
                    settings=settings,
                    max_jobs=max_jobs,
                    lease_seconds=lease,
                    types=types,
                )
                next_due = due.next_due_at(conn, now) if not claimed and wait_seconds else None
        remaining = deadline - time.monotonic()
        if claimed or remaining <= 0:
            return claimed
        if next_due is not None:
            remaining = min(remaining, (next_due + _AFTER_DUE - utcnow()).total_seconds())
        bell.wait(seen, remaining)
        woken = True


def _look(now: datetime, types: tuple[str, ...] | None) -> tuple[bool, datetime | None]:
    """Whether a claim may find work now; if not, when the clock next makes some due."""
    with db.read() as conn:
        if due.claimable_now(conn, now, types):
            return True, None
        return False, due.next_due_at(conn, now)
