"""The tables kept per job type: admins' flow-control overrides, the rate-limit windows that
limited claims serialize on, and when workers last asked for each type. On the schema's
``metadata``, beside the tables of ``app.storage.schema``."""

from __future__ import annotations

from sqlalchemy import Boolean, CheckConstraint, Column, Integer, String, Table, text

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
    CheckConstraint("max_running IS NULL OR max_running >= 1", name="max_running"),
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
