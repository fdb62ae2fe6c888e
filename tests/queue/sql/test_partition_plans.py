"""The partitions' turns read indexes only on SQLite: the walk over partitions and each one's
next job probe ix_jobs_claim_partition, the jobs without a partition the claim index, and the
check every claim makes (is a partitioned job claimable?) probes the partial index, not the
table."""

from __future__ import annotations

from flask import Flask

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.sql import dialects
from app.queue.sql.type_limits import claim_overrides_sql
from app.queue.usecases import claiming
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import make_job
from tests.queue.sql.test_query_plans import recorded, seed, table_scans


def test_fair_claims_read_indexes_only(app: Flask) -> None:
    with app.app_context():
        producer, worker, _ = seed(app)
        settings = queue_settings()
        with db.transaction() as conn:
            for n in range(40):
                make_job(conn, producer, settings, partition=f"p{n % 7}")
        typed = {"max_jobs": 3, "types": ("email.send",)}
        for options in ({"max_jobs": 1}, {"max_jobs": 9}, typed):
            with recorded(app) as statements, db.transaction() as conn:
                claimed = claiming.claim_many(
                    conn, worker, now=utcnow(), settings=settings, **options
                ).jobs
            assert claimed, options
            assert any("ix_jobs_claim_partition" in sql for sql, _ in statements)
            # partition_turns holds a row per priority at most: read whole
            scans = table_scans(app, statements)
            assert [line for line in scans if not line.startswith("SCAN partition_turns")] == []


def test_the_claims_partition_check_probes_the_partial_index(app: Flask) -> None:
    with app.app_context():
        sql = claim_overrides_sql(dialects.of(db.engine(app)))
        raw = db.engine(app).raw_connection()
        try:
            plan = [row[-1] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}")]
        finally:
            raw.close()
    assert any("ix_jobs_claim_partition" in line for line in plan), plan
    # (a scan of the partial index stops at its first entry: EXISTS)
    assert not any(line.startswith("SCAN jobs") and "INDEX" not in line for line in plan), plan
