"""SQL of secret payload fields: the one read of their sealed values, by a claim of the jobs it
just took (every other read of a job leaves the column out, ``JOB_COLUMNS``)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Connection, bindparam, literal_column, select

from app.queue.sql import dialects
from app.queue.sql.items import Columns, Kind, parameter
from app.storage.schema import jobs

_WANTED: Columns = (("job_id", Kind.BIGINT),)


def sealed_secrets(conn: Connection, ids: Collection[int], worker: str) -> dict[int, str]:
    """The sealed secrets of those of ``ids`` that ``worker`` holds now (running), by job id;
    one statement whatever the number of jobs."""
    if not ids:
        return {}
    wanted = dialects.of(conn).items(_WANTED, "wanted")
    query = select(jobs.c.id, jobs.c.secrets_sealed).where(
        jobs.c.id.in_(select(wanted.c.job_id)),
        jobs.c.status == literal_column("'running'"),
        jobs.c.worker_id == bindparam("worker"),
        jobs.c.secrets_sealed.is_not(None),
    )
    params = {"items": parameter(_WANTED, [{"job_id": job_id} for job_id in ids])}
    return {
        int(job_id): str(text) for job_id, text in conn.execute(query, params | {"worker": worker})
    }
