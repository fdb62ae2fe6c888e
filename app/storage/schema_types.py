"""The tables kept per job type: admins' flow-control overrides, the rate-limit windows that
limited claims serialize on (and count per partition in), and when workers last asked for each
type. On the schema's ``metadata``, beside the tables of ``app.storage.schema``."""

from __future__ import annotations

from sqlalchemy import Boolean, CheckConstraint, Column, Integer, String, Table, text

from app.queue.vocabulary import job_fields
from app.storage.schema import metadata
from app.storage.sqltypes import UTCDateTime

# Runtime flow-control overrides per job type (docs/api.md, "Flow control"), set by admins over
# ``JOB_TYPE_SETTINGS``; a NULL column means "no override, use the configuration".
type_overrides = Table(
    "type_overrides",
    metadata,
    Column("type", String(200), primary_key=True),
    Column("max_running", Integer, nullable=True),
    Column("rate_limit", String(32), nullable=True),
    Column("paused", Boolean, nullable=True),
    Column("max_run_seconds", Integer, nullable=True),
    Column("updated_by", String(64), nullable=True),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("partition_max_running", Integer, nullable=True),
    Column("partition_rate_limit", String(32), nullable=True),
    CheckConstraint("max_running IS NULL OR max_running >= 1", name="max_running"),
    CheckConstraint(
        "partition_max_running IS NULL OR partition_max_running >= 1",
        name="partition_max_running",
    ),
)

# Claims per type in the current rate-limit window; the row is also what concurrent claims of
# a limited type serialize on (SELECT ... FOR UPDATE on PostgreSQL).
type_claim_windows = Table(
    "type_claim_windows",
    metadata,
    Column("type", String(200), primary_key=True),
    Column("window_started_at", UTCDateTime(), nullable=False),
    Column("claims", Integer, nullable=False, server_default=text("0")),
)

# Claims per partition of a type in the current window of its ``partition_rate_limit``
# (``partition``: "" for the jobs without one). Claims of the type count here while holding its
# ``type_claim_windows`` row; rows of windows that ended are deleted as claims count.
partition_claim_windows = Table(
    "partition_claim_windows",
    metadata,
    Column("type", String(200), primary_key=True),
    Column("partition", String(job_fields.PARTITION.length), primary_key=True),
    Column("window_started_at", UTCDateTime(), nullable=False),
    Column("claims", Integer, nullable=False),
)

# When a worker last asked for jobs of each type, whether its claim found one or not (a claim
# without ``types`` asks for every configured type): the explainer's ``no_worker_polling``.
# Each process writes a type's row at most once per EXPLAIN_IDLE_WORKER_SECONDS / 10
# (``app.queue.usecases.type_polls``), so empty claims do not write on every call.
type_polls = Table(
    "type_polls",
    metadata,
    Column("type", String(200), primary_key=True),
    Column("polled_at", UTCDateTime(), nullable=False),
)
