"""What producers and admins do to a job: cancel it, retry it (each audited as ``origin``, at
``now``), and prune old finished jobs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from app.audit import store as audit_store
from app.audit.actions import AuditAction, Origin
from app.queue.rules import edges, retention
from app.queue.rules.policy import Action, job_allows
from app.queue.usecases.reading import get_job
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Changed
from app.queue.vocabulary.errors import Conflict
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import TERMINAL


def cancel(
    conn: Connection, actor: Actor, job_id: int, *, now: datetime, origin: Origin
) -> Changed[Job]:
    """Cancel a job: producers their own pending jobs, admins any unfinished job."""
    job = get_job(conn, actor, job_id)
    if not job_allows(actor, Action.CANCEL, job):
        why = "finished" if job.status in TERMINAL else job.status
        raise Conflict(f"job {job_id} cannot be cancelled: it is {why}")
    done = edges.cancel(conn, job, now=now, actor=actor.name)
    if done.value is None:
        raise Conflict(f"job {job_id} changed before it could be cancelled")
    audit_store.record(conn, origin, AuditAction.JOB_CANCEL, f"job:{job_id}", at=now)
    return Changed(done.value, done.effects)


def retry(
    conn: Connection, actor: Actor, job_id: int, *, now: datetime, origin: Origin
) -> Changed[Job]:
    """Admins: put a failed or cancelled job back in the queue with a fresh retry budget."""
    job = get_job(conn, actor, job_id)
    if not job_allows(actor, Action.RETRY, job):
        raise Conflict(
            f"only failed or cancelled jobs can be retried; job {job_id} is {job.status}"
        )
    done = edges.retry(conn, job, now=now, actor=actor.name)
    if done.value is None:
        raise Conflict(f"job {job_id} changed before it could be retried")
    audit_store.record(conn, origin, AuditAction.JOB_RETRY, f"job:{job_id}", at=now)
    return Changed(done.value, done.effects)


def prune(conn: Connection, *, finished_before: datetime, batch: int) -> int:
    """Delete one batch of finished jobs (of any finished status) older than
    ``finished_before``, with their events; how many jobs went."""
    cutoffs = dict.fromkeys(sorted(TERMINAL), finished_before)
    return retention.prune_jobs(conn, cutoffs, batch).job_total
