"""Long-polls: the claim (try, and while nothing is due sleep on the wake-up) and the wait for a
job's outcome (read, and while it runs sleep on its watch), both holding nothing meanwhile."""

from __future__ import annotations

import contextlib
import time
from datetime import datetime, timedelta
from typing import NamedTuple, cast

from flask import g

from app import db
from app.api import auth
from app.api.admission import admission
from app.queue.domain import secret_fields, service
from app.queue.domain.models import Job, QueueSettings
from app.queue.domain.secret_fields import Secrets
from app.queue.domain.states import TERMINAL
from app.queue.engines import due
from app.queue_settings import poll_notes
from app.secretbox import current_box
from app.timeutil import utcnow

# Look a little after a due instant: leases count as expired only strictly after their end.
_AFTER_DUE = timedelta(milliseconds=5)


class Claim(NamedTuple):
    """What a claim got (the jobs, and the secrets of those that have some, by job id), and
    whether it was refused a wait (too many waiting already)."""

    jobs: list[Job]
    secrets: dict[int, Secrets]
    refused_wait: bool = False


def claim(
    settings: QueueSettings,
    lease: int | None,
    wait_seconds: float,
    *,
    max_jobs: int = 1,
    types: tuple[str, ...] | None = None,
) -> Claim:
    """Claim up to ``max_jobs`` due jobs (of ``types``, when given) for the current actor,
    waiting up to ``wait_seconds`` for one.

    Between tries the request holds no connection, transaction or lock: it sleeps on the
    process's wake-up bell until a commit anywhere makes a job due, the next scheduled instant
    (``run_at``, lease end) arrives, or the wait ends. It waits only when admitted (see
    ``app.api.admission``); refused, it answers with what its first try found.
    """
    deadline = time.monotonic() + wait_seconds
    wakeups = db.wakeups()
    turn = wakeups.turn(types)
    rung = False
    with contextlib.ExitStack() as slot:
        admitted = False
        while True:
            # Read before looking, so a job committed after our look still rings a newer generation.
            seen = wakeups.generation() if wait_seconds else 0
            # A ring wakes every waiting claim of the process. They look one at a time, and once
            # one that looked after this ring found nothing, the others go back to sleep at once.
            with turn.gate if rung else contextlib.nullcontext():
                found_nothing, note = turn.nothing_since(seen) if rung else (False, None)
                claimed: list[Job] = []
                secrets: dict[int, Secrets] = {}
                if found_nothing:
                    next_due = cast("datetime | None", note)
                else:
                    claimed, secrets, next_due = _try(
                        settings, lease, max_jobs, types, waiting=wait_seconds > 0
                    )
                    if not claimed and wait_seconds:
                        turn.found_nothing(seen, next_due)
            remaining = deadline - time.monotonic()
            if claimed or remaining <= 0:
                return Claim(claimed, secrets)
            if not admitted:
                admitted = slot.enter_context(admission().waiting(auth.caller_key()))
                if not admitted:
                    return Claim([], {}, refused_wait=True)
            if next_due is not None:
                remaining = min(remaining, (next_due + _AFTER_DUE - utcnow()).total_seconds())
            rung = wakeups.wait(seen, remaining)


def _try(
    settings: QueueSettings,
    lease: int | None,
    max_jobs: int,
    types: tuple[str, ...] | None,
    *,
    waiting: bool,
) -> tuple[list[Job], dict[int, Secrets], datetime | None]:
    """One claim, with the secrets of the jobs it took opened in its transaction (a failure to
    open them rolls the claim back); when it finds nothing and the caller waits, also when the
    clock next makes a job due."""
    now = utcnow()
    with db.transaction() as conn:
        claimed = service.claim_many(
            conn,
            g.actor,
            now=now,
            settings=settings,
            max_jobs=max_jobs,
            lease_seconds=lease,
            types=types,
            polls=poll_notes(),
        )
        secrets = secret_fields.for_holder(conn, claimed, g.actor.name, current_box())
        next_due = due.next_due_at(conn, now) if not claimed and waiting else None
    return claimed, secrets, next_due


class Outcome(NamedTuple):
    """The job as a wait for its outcome left it, and whether it was refused the wait."""

    job: Job
    refused_wait: bool = False


def outcome(job_id: int, wait_seconds: float) -> Outcome:
    """The job the current actor asked for, as soon as it is finished (completed, failed or
    cancelled) or after ``wait_seconds`` as it is then. Between reads it holds no connection:
    it sleeps until a commit in any process or app server finishes this job (``app.outcomes``).
    It waits only when admitted (``app.api.admission``, like a claim); refused, it answers with
    the job as first read."""
    deadline = time.monotonic() + wait_seconds
    watch = db.outcomes_of()
    with watch.watch.watching(job_id), contextlib.ExitStack() as slot:
        admitted = False
        while True:
            # Read what was heard before reading the job, so a finish after the read wakes us.
            seen = watch.seen(job_id) if wait_seconds else (0, 0)
            with db.read() as conn:
                job = service.get_job(conn, g.actor, job_id)
            remaining = deadline - time.monotonic()
            if job.status in TERMINAL or remaining <= 0:
                return Outcome(job)
            if not admitted:
                admitted = slot.enter_context(admission().waiting(auth.caller_key()))
                if not admitted:
                    return Outcome(job, refused_wait=True)
            watch.wait(job_id, seen, remaining)
