"""What producers and admins do to a job: cancel it, retry it (with an edit), run it now
(each audited as ``origin``, at ``now``), and prune old finished jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from app.audit import store as audit_store
from app.audit.actions import AuditAction, Origin
from app.queue.rules import edges, retention
from app.queue.rules.policy import Action, job_allows
from app.queue.rules.settings import QueueSettings
from app.queue.usecases import explain
from app.queue.usecases.reading import get_job
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Changed
from app.queue.vocabulary.errors import Conflict
from app.queue.vocabulary.jobs import Job, JobEdit
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
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    origin: Origin,
    edit: JobEdit | None = None,
) -> Changed[Job]:
    """Admins: put a failed or cancelled job back in the queue with a fresh retry budget, with
    the fields ``edit`` gives replaced; the ``edited`` event and the audit row name the fields
    that changed (never their values). The edit holds no secrets: a finished job's secret
    values were erased, and the retried job, edited or not, runs without them."""
    job = get_job(conn, actor, job_id)
    if not job_allows(actor, Action.RETRY, job):
        raise Conflict(
            f"only failed or cancelled jobs can be retried; job {job_id} is {job.status}"
        )
    edit = edit or JobEdit()
    changes = edit.changes(job)
    done = edges.retry(conn, job, now=now, actor=actor.name, note=edit.reason, changes=changes)
    if done.value is None:
        raise Conflict(f"job {job_id} changed before it could be retried")
    details: dict[str, Any] = {"changed": list(changes)} if changes else {}
    if edit.reason:
        details["reason"] = edit.reason
    audit_store.record(conn, origin, AuditAction.JOB_RETRY, f"job:{job_id}", at=now, **details)
    return Changed(done.value, done.effects)


def run_now(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    now: datetime,
    origin: Origin,
    settings: QueueSettings,
) -> Changed[Job]:
    """Its owner or an admin: a pending job waiting for its run_at or a retry's backoff is due
    at ``now``. Conflict when it is not pending, is due already, or something other than time
    holds it (its dependencies, its type paused, a flow limit: the explainer's reason)."""
    job = get_job(conn, actor, job_id)
    if not job_allows(actor, Action.RUN_NOW, job):
        raise Conflict(f"only pending jobs can run now; job {job_id} is {job.status}")
    if (held := explain.held_beyond_time(conn, job, now=now, settings=settings)) is not None:
        raise Conflict(f"job {job_id} cannot run now: {held.detail}")
    if job.run_at <= now:
        raise Conflict(f"job {job_id} is already due: the next claim that reaches it takes it")
    done = edges.run_now(conn, job, now=now, actor=actor.name)
    if done.value is None:
        raise Conflict(f"job {job_id} changed before it could run now")
    audit_store.record(conn, origin, AuditAction.JOB_RUN_NOW, f"job:{job_id}", at=now)
    return Changed(done.value, done.effects)


def prune(conn: Connection, *, finished_before: datetime, batch: int) -> int:
    """Delete one batch of finished jobs (of any finished status) older than
    ``finished_before``, with their events; how many jobs went."""
    cutoffs = dict.fromkeys(sorted(TERMINAL), finished_before)
    return retention.prune_jobs(conn, cutoffs, batch).job_total
