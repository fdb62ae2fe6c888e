"""Reading jobs as a caller may see them: one job, a page of jobs, a job's history."""

from __future__ import annotations

from sqlalchemy import Connection

from app.queue.contract.cursors import encode_cursor
from app.queue.rules.visibility import viewer
from app.queue.sql import jobs as jobs_sql
from app.queue.vocabulary.errors import (
    NotFound,
)
from app.queue.vocabulary.models import (
    Actor,
    Event,
    Job,
    JobFilters,
    JobPage,
)


def get_job(conn: Connection, actor: Actor, job_id: int) -> Job:
    """A job the actor may see; NotFound for missing and invisible alike."""
    job = jobs_sql.get_visible_job(conn, job_id, viewer(actor))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def list_jobs(conn: Connection, actor: Actor, filters: JobFilters) -> JobPage:
    """A page of the jobs the actor may see, newest first, with keyset cursors."""
    found, more = jobs_sql.list_jobs(conn, filters, viewer(actor))
    going_newer = filters.after_id is not None
    next_cursor = prev_cursor = None
    if found and (more or going_newer):
        next_cursor = encode_cursor("before", found[-1].id)
    if found and (filters.before_id is not None or (going_newer and more)):
        prev_cursor = encode_cursor("after", found[0].id)
    return JobPage(jobs=found, next_cursor=next_cursor, prev_cursor=prev_cursor)


def list_events(conn: Connection, actor: Actor, job_id: int) -> list[Event]:
    """A visible job's history, oldest first."""
    get_job(conn, actor, job_id)
    return jobs_sql.list_events(conn, job_id)
