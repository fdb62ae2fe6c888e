"""Reading jobs as a caller may see them: one job, a page of jobs, a job's history."""

from __future__ import annotations

from sqlalchemy import Connection

from app.queue.rules.visibility import viewer
from app.queue.sql import jobs as jobs_sql
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import (
    NotFound,
)
from app.queue.vocabulary.jobs import Event, Job


def get_job(conn: Connection, actor: Actor, job_id: int) -> Job:
    """A job the actor may see; NotFound for missing and invisible alike."""
    job = jobs_sql.get_visible_job(conn, job_id, viewer(actor))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def list_events(conn: Connection, actor: Actor, job_id: int) -> list[Event]:
    """A visible job's history, oldest first."""
    get_job(conn, actor, job_id)
    return jobs_sql.list_events(conn, job_id)
