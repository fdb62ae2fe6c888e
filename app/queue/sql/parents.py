"""SQL of parents' results: what the parents of freshly claimed jobs returned, read in the
claim's transaction by one statement for the whole claimed batch."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Connection, select

from app.queue.sql import dialects
from app.queue.sql.items import Columns, Kind, parameter
from app.queue.vocabulary.jobs import ParentResult
from app.storage.schema import jobs

_WANTED: Columns = (("job_id", Kind.BIGINT),)


def parent_results(conn: Connection, ids: Collection[int]) -> dict[int, ParentResult]:
    """The type, status and result of the jobs ``ids`` that still exist, by id (their payloads
    and errors are not read)."""
    if not ids:
        return {}
    wanted = dialects.of(conn).items(_WANTED, "wanted")
    query = select(jobs.c.id, jobs.c.type, jobs.c.status, jobs.c.result).where(
        jobs.c.id.in_(select(wanted.c.job_id))
    )
    params = {"items": parameter(_WANTED, [{"job_id": job_id} for job_id in ids])}
    return {
        int(row.id): ParentResult(int(row.id), row.type, row.status, row.result)
        for row in conn.execute(query, params)
    }
