"""The figures the database keeps for itself: job counts per scope, holders, finishes per minute
and worker activity (kept by triggers, migrations 0009 and 0011), and the metric rollup of
/metrics. On the schema's ``metadata``, beside the tables of ``app.storage.schema``."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, Integer, SmallInteger, String, Table

from app.queue.vocabulary.states import JobStatus
from app.storage.schema import metadata
from app.storage.sqltypes import BigId, UTCDateTime, partial_index

# The figures below are kept by database triggers (migration 0009) in the transaction of every
# statement that inserts, moves or deletes a job or appends an event, so no code path can forget
# them. A scope is whose figures they are: '*' (everyone's), 'owner:<user id>' (a producer's
# jobs), 'holder:<worker name>' (the jobs a worker holds or held), 'worker:<worker name>' (the
# jobs running for a worker now, for the workers page). PostgreSQL writers each add to
# a shard no other running transaction holds; readers sum the shards (SQLite writes shard 0).
# One column per status, so a move is one row per scope. The counts hold because a job's type,
# priority and owner never change (a trigger refuses it; an admin's retry may reprice a
# job, and a trigger then moves its count: migration 0026).
job_counts = Table(
    "job_counts",
    metadata,
    Column("scope", String(80), primary_key=True),
    Column("type", String(200), primary_key=True),
    Column("priority", SmallInteger, primary_key=True, autoincrement=False),
    Column("shard", SmallInteger, primary_key=True, autoincrement=False),
    *(Column(status.value, BigInteger, nullable=False) for status in JobStatus),
    sqlite_with_rowid=False,
)

# Every worker that ever claimed a job, with the job's current status and run_at: a worker's
# lists and oldest due job walk its own rows. No foreign key: the jobs delete trigger removes
# them after counting them.
job_holders = Table(
    "job_holders",
    metadata,
    Column("worker", String(64), primary_key=True),
    Column("job_id", BigId, primary_key=True, autoincrement=False),
    Column("status", String(16), nullable=False),
    Column("run_at", UTCDateTime(), nullable=False),
    Index(None, "job_id"),
    Index(None, "worker", "status", "job_id"),
    sqlite_with_rowid=False,
)
partial_index(
    "ix_job_holders_pending",
    job_holders.c.worker,
    job_holders.c.run_at,
    where=job_holders.c.status == "pending",
)

# Rings of 60 minute slots (slot = minute of the hour; a newer minute restarts its slot):
# completions and final failures per scope for the dashboard chart, and what each worker
# claimed, completed and failed for the workers page.
finished_per_minute = Table(
    "finished_per_minute",
    metadata,
    Column("scope", String(80), primary_key=True),
    Column("status", String(16), primary_key=True),
    Column("slot", SmallInteger, primary_key=True, autoincrement=False),
    Column("shard", SmallInteger, primary_key=True, autoincrement=False),
    Column("minute", UTCDateTime(), nullable=False),
    Column("n", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

worker_activity = Table(
    "worker_activity",
    metadata,
    Column("worker", String(64), primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("slot", SmallInteger, primary_key=True, autoincrement=False),
    Column("shard", SmallInteger, primary_key=True, autoincrement=False),
    Column("minute", UTCDateTime(), nullable=False),
    Column("n", BigInteger, nullable=False),
    Column("last_at", UTCDateTime(), nullable=False),
    sqlite_with_rowid=False,
)

# Job figures for /metrics, rolled up from job_events at scrape time so every app server
# reports the same monotonic totals; ``metric_rollup`` holds the last event counted.
metric_counters = Table(
    "metric_counters",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("type", String(200), primary_key=True),
    Column("label", String(32), primary_key=True),
    Column("value", Float, nullable=False),
)

metric_rollup = Table(
    "metric_rollup",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("last_event_id", BigInteger, nullable=False),
)
