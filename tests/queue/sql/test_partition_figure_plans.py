"""The busiest partitions' figures read bounded samples through partial indexes on both engines:
a type's due jobs from its range of ix_jobs_pending_type (at most DUE_SAMPLE rows, however large
the backlog), the running jobs from the lease index (running jobs only), never the table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text

from app.infra import db
from app.queue.sql import partition_figures as partition_figures_sql
from app.queue.usecases import partition_figures
from app.queue.vocabulary.timeutil import utcnow
from tests.backends import every_backend  # noqa: F401 (both engines)
from tests.builders import make_user
from tests.queue.sql.test_claim_plans import _measured_plan
from tests.queue.sql.test_query_plans import recorded

BACKLOG = 12_000  # due jobs of email.send, beyond DUE_SAMPLE
OTHERS = 3_000  # of report.build, and as many finished
RUNNING = 300
PARTITIONS = 1_000

_FILL = (
    "INSERT INTO jobs (type, payload, priority, max_retries, created_by, run_at, created_at, "
    "updated_at, status, partition, worker_id, lease_expires_at) "
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :n) "
    "SELECT :type, '{}', 0, 3, :owner, '2026-01-01 00:00:00', '2026-01-01 00:00:00', "
    "'2026-01-01 00:00:00', :status, 'p' || (i % :partitions), :worker, :lease FROM n"
)


def _fill(app: Flask) -> None:
    """A backlog spread over many partitions, other types, finished and running jobs, and the
    statistics that know them."""
    owner = make_user(app, "figures-producer", "producer").actor()
    lease = "2099-01-01 00:00:00"
    rows: list[tuple[str, str, int, str | None, str | None]] = [
        ("email.send", "pending", BACKLOG, None, None),
        ("report.build", "pending", OTHERS, None, None),
        ("report.build", "completed", OTHERS, None, None),
        ("email.send", "running", RUNNING, "figures-worker", lease),
    ]
    with app.app_context(), db.transaction() as conn:
        for job_type, status, n, worker, until in rows:
            params = {"type": job_type, "status": status, "n": n, "owner": owner.id}
            params |= {"partitions": PARTITIONS, "worker": worker, "lease": until}
            conn.execute(text(_FILL), params)
    with app.app_context(), db.engine(app).connect() as conn:
        conn.execute(text("ANALYZE"))
        conn.commit()


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _sqlite_plan(app: Flask, sql: str, params: Any) -> list[str]:
    raw = db.engine(app).raw_connection()
    try:
        return [row[-1] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()]
    finally:
        raw.close()


def _reads(app: Flask, statement: tuple[str, Any]) -> list[tuple[str, str, int]]:
    """(how, index, rows) of each read of ``jobs`` in the statement's plan (rows: PostgreSQL's
    actual rows; -1 on SQLite)."""
    sql, params = statement
    if db.engine(app).dialect.name == "sqlite":
        lines = _sqlite_plan(app, sql, params)
        found = []
        for line in lines:
            words = line.split()
            if len(words) > 1 and words[1] == "jobs":
                index = words[words.index("INDEX") + 1] if "INDEX" in words else ""
                found.append((words[0], index, -1))
        return found
    return [
        (node["Node Type"], node.get("Index Name", ""), int(node["Actual Rows"]))
        for node in _nodes(_measured_plan(app, (sql, params)))
        if node.get("Relation Name") == "jobs"
    ]


def test_the_figures_read_bounded_samples_through_partial_indexes(app: Flask, backend: str) -> None:
    _fill(app)
    with app.app_context(), recorded(app) as statements, db.read() as conn:
        found = partition_figures.busiest(conn, ["email.send"], utcnow())
    figures = found["email.send"]
    assert figures.due.total == partition_figures_sql.DUE_SAMPLE  # the oldest due jobs only
    assert figures.running.total == RUNNING
    assert len(figures.due.named) == partition_figures_sql.BUSIEST
    due, running = (
        next(s for s in statements if word in s[0]) for word in ("'pending'", "'running'")
    )
    due_reads, running_reads = _reads(app, due), _reads(app, running)
    assert due_reads and {index for _, index, _ in due_reads} == {"ix_jobs_pending_type"}, due_reads
    assert running_reads and {i for _, i, _ in running_reads} == {"ix_jobs_lease"}, running_reads
    if backend == "postgresql":
        assert all(rows <= partition_figures_sql.DUE_SAMPLE for _, _, rows in due_reads), due_reads
        assert all(rows <= RUNNING for _, _, rows in running_reads), running_reads
    else:
        assert {how for how, _, _ in due_reads} == {"SEARCH"}, due_reads


@pytest.mark.parametrize("job_type", ["webhook.deliver"])
def test_a_type_without_jobs_has_empty_figures(app: Flask, backend: str, job_type: str) -> None:
    with app.app_context(), db.read() as conn:
        found = partition_figures.busiest(conn, [job_type], utcnow())
    assert found == {job_type: partition_figures.PartitionFigures()}
