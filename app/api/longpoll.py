"""The wait for a job's outcome (``GET /jobs/{id}?wait_seconds=N``): read, and while it runs sleep
on its watch, holding nothing meanwhile. (Waiting claims: ``app.api.claims``.)"""

from __future__ import annotations

import contextlib
import time
from typing import NamedTuple

from flask import g

from app.api import auth
from app.api.admission import admission
from app.infra import db
from app.queue.usecases import reading
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import TERMINAL


class Awaited(NamedTuple):
    """The job as a wait for its outcome left it, and whether it was refused the wait."""

    job: Job
    refused_wait: bool = False


def outcome(job_id: int, wait_seconds: float) -> Awaited:
    """The job the current actor asked for, as soon as it is finished (completed, failed or
    cancelled) or after ``wait_seconds`` as it is then. Between reads it holds no connection: it
    sleeps until a commit in any process or app server finishes this job (``app.storage.outcomes``).
    It waits only when admitted (``app.api.admission``, like a claim); refused, it answers with the
    job as first read."""
    deadline = time.monotonic() + wait_seconds
    watch = db.outcomes_of()
    with watch.watch.watching(job_id), contextlib.ExitStack() as slot:
        admitted = False
        while True:
            # Read what was heard before reading the job, so a finish after the read wakes us.
            seen = watch.seen(job_id) if wait_seconds else (0, 0)
            with db.read() as conn:
                job = reading.get_job(conn, g.actor, job_id)
            remaining = deadline - time.monotonic()
            if job.status in TERMINAL or remaining <= 0:
                return Awaited(job)
            if not admitted:
                admitted = slot.enter_context(admission().waiting(auth.caller_key()))
                if not admitted:
                    return Awaited(job, refused_wait=True)
            watch.wait(job_id, seen, remaining)
