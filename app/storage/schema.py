"""SQLAlchemy Core tables; the migrations in ``app/migrations`` must produce exactly these."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)

from app.queue.vocabulary import job_fields
from app.queue.vocabulary.states import PRIORITIES, EventKind, JobStatus, Role
from app.queue.vocabulary.trace import TRACESTATE_MAX
from app.storage.sqltypes import (
    BigId,
    JSONDocument,
    NullableDocument,
    UTCDateTime,
    one_of,
    partial_index,
)


def created_on(item: Any, dialect: str) -> bool:
    """Whether the schema item (a table's constraint or index) exists on the engine ``dialect``:
    an item made for one engine (``ddl_if(dialect=...)``) is neither created nor compared on
    the other."""
    only = getattr(item, "_ddl_if", None)  # SQLAlchemy's record of ``ddl_if``
    return only is None or only.dialect in (None, dialect)


metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    # lower(name): unique, so "Admin" cannot be created next to "admin". A column rather than an
    # expression index because SQLite cannot reflect expression indexes (the schema check).
    Column("name_lower", String(64), nullable=False, server_default=text("''")),
    Column("password_hash", String(255), nullable=True),
    Column("role", String(16), nullable=False),
    Column("max_priority", SmallInteger, nullable=False, server_default=text("10")),
    Column("disabled", Boolean, nullable=False, server_default=text("false")),
    # Rotated at logout, disable and role change: every session cookie issued before dies.
    Column("session_nonce", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    # Second factor: the TOTP secret (None until enrolled) and the last time step accepted,
    # so a code cannot be used twice. The secret is encrypted under SECRETS_KEY in
    # totp_sealed; totp_secret holds only secrets stored in plain text before migration 0012,
    # until their next use moves them. totp_pending: the secret shown during enrolment.
    Column("totp_secret", String(64), nullable=True),
    Column("totp_last_step", BigInteger, nullable=True),
    Column("totp_sealed", String(512), nullable=True),
    Column("totp_pending", String(512), nullable=True),
    one_of("role", Role, name="role"),
    one_of("max_priority", PRIORITIES.values(), name="max_priority"),
    sqlite_autoincrement=True,
)
Index("uq_users_name_lower", users.c.name_lower, unique=True)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("label", String(100), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("last_used_at", UTCDateTime(), nullable=True),
    Column("revoked_at", UTCDateTime(), nullable=True),
    # None: the token lives until revoked.
    Column("expires_at", UTCDateTime(), nullable=True),
    Index(None, "user_id"),
    sqlite_autoincrement=True,
)

# Single-use recovery codes of the second factor (only their SHA-256 is kept).
recovery_codes = Table(
    "recovery_codes",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("code_hash", String(64), nullable=False),
    Column("used_at", UTCDateTime(), nullable=True),
    Index(None, "user_id"),
)

# A per-job field's limits and default are declared once, in ``job_fields``.
_RETRIES, _PRIORITY = job_fields.MAX_RETRIES, PRIORITIES[job_fields.DEFAULT_PRIORITY]
jobs = Table(
    "jobs",
    metadata,
    Column("id", BigId, primary_key=True),
    Column("type", String(200), nullable=False),
    Column("payload", JSONDocument, nullable=False),
    Column("priority", SmallInteger, nullable=False, server_default=text(f"{_PRIORITY}")),
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("retry_count", Integer, nullable=False, server_default=text("0")),
    Column("max_retries", Integer, nullable=False, server_default=text(f"{_RETRIES.default}")),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("idempotency_key", String(job_fields.IDEMPOTENCY_KEY.length), nullable=True),
    # SHA-256 of the normalized enqueue request: a repeated key must repeat the request.
    Column("request_fingerprint", String(64), nullable=True),
    Column("created_by", Integer, ForeignKey("users.id"), nullable=False),
    Column("run_at", UTCDateTime(), nullable=False),
    Column("claimed_at", UTCDateTime(), nullable=True),
    Column("lease_expires_at", UTCDateTime(), nullable=True),
    # The lease length of the current claim; a heartbeat extends the lease by this much.
    Column("lease_seconds", Integer, nullable=True),
    Column("worker_id", String(64), nullable=True),
    Column("progress", SmallInteger, nullable=True),
    Column("progress_message", String(500), nullable=True),
    Column("result", JSONDocument, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime(), nullable=True),
    # Uniqueness while active (docs/api.md): an enqueue with the same producer, type and key
    # answers the pending or running job instead of a new one.
    Column("unique_key", String(job_fields.UNIQUE_KEY.length), nullable=True),
    # Secret payload fields: names comma-separated (shown), values one Fernet token under
    # SECRETS_KEY (opened only by a claim, erased when the job finishes for good).
    Column("secret_names", String(1100), nullable=True),
    Column("secrets_sealed", Text, nullable=True),
    # When the running attempt must have finished (its type's max_run_seconds from the claim;
    # None: no limit, or not running). Set by the claim, cleared when the job stops running.
    Column("deadline_at", UTCDateTime(), nullable=True),
    # Dependencies (migration 0015): the parents named at enqueue (never changes)
    # and those not finished yet. waiting_for is NULL once nothing is awaited (and whenever the
    # job is not pending), which keeps a waiting job out of the claim's partial indexes.
    Column("depends_on", NullableDocument, nullable=True),
    Column("waiting_for", NullableDocument, nullable=True),
    # The group the job is a member of, or whose callback it is (a callback is no member).
    Column("group_id", BigInteger, nullable=True),
    Column("callback_of", BigInteger, nullable=True),
    # Whether a job ever named it as a parent: only then does its finish look for children.
    Column("has_dependents", Boolean, nullable=False, server_default=text("false")),
    # The job whose worker spawned this one (no foreign key: pruning a parent leaves its
    # children be), and the enqueue's W3C trace context (``app.queue.vocabulary.trace``).
    Column("parent_id", BigId, nullable=True),
    Column("traceparent", String(55), nullable=True),
    Column("tracestate", String(TRACESTATE_MAX), nullable=True),
    # A spawned job's idempotency key, in its parent's namespace (``idempotency_key`` holds
    # the keys its producer enqueued with itself; a job has one of the two at most).
    Column("child_key", String(job_fields.IDEMPOTENCY_KEY.length), nullable=True),
    # The partition the job is claimed fairly in (migration 0027); NULL: the partition null.
    Column("partition", String(job_fields.PARTITION.length), nullable=True),
    one_of("status", JobStatus, name="status"),
    one_of("priority", PRIORITIES.values(), name="priority"),
    CheckConstraint(_RETRIES.check("max_retries"), name="max_retries"),
    CheckConstraint("retry_count >= 0 AND attempts >= 0", name="counters"),
    CheckConstraint("progress IS NULL OR progress BETWEEN 0 AND 100", name="progress"),
    CheckConstraint(
        "status <> 'running' OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL)",
        name="running_has_lease",
    ),
    # An owner's idempotency keys are unique: on SQLite as the table's constraint, on PostgreSQL
    # as a unique index of keyed jobs only (below), which a job without a key never writes to.
    UniqueConstraint("created_by", "idempotency_key").ddl_if(dialect="sqlite"),
    sqlite_autoincrement=True,
)
Index(
    "uq_jobs_owner_idempotency_key",
    jobs.c.created_by,
    jobs.c.idempotency_key,
    unique=True,
    postgresql_where=jobs.c.idempotency_key.is_not(None),
).ddl_if(dialect="postgresql")
# A job's idempotency key as the code reads it, in whichever namespace.
JOB_KEY = func.coalesce(jobs.c.idempotency_key, jobs.c.child_key).label("idempotency_key")


# The claim order, served by a partial index so a claim reads the head of the queue only
# (status too, so SQLite counts the jobs ahead of one from the index alone).
# A job waiting for its parents is not in it (nor in ix_jobs_pending_type): however many wait,
# the claim reads only claimable jobs.
CLAIMABLE = text("status = 'pending' AND waiting_for IS NULL")
_CLAIM_ORDER = (jobs.c.priority.desc(), jobs.c.run_at, jobs.c.id, jobs.c.status)
partial_index("ix_jobs_claim", *_CLAIM_ORDER, where=CLAIMABLE)
# The partitions' turns (migration 0027): each partition's claimable jobs in FIFO order, of
# partitioned jobs only, so a queue without partitions never writes to it.
_PARTITIONED = text("status = 'pending' AND waiting_for IS NULL AND partition IS NOT NULL")
_TURN_ORDER = (jobs.c.priority.desc(), jobs.c.partition, jobs.c.run_at, jobs.c.id)
partial_index("ix_jobs_claim_partition", *_TURN_ORDER, where=_PARTITIONED)
# Expired leases, found without scanning finished jobs.
partial_index("ix_jobs_lease", jobs.c.lease_expires_at, where=jobs.c.status == "running")
# Listing newest first, by status, by owner, by type.
Index("ix_jobs_status_id", jobs.c.status, jobs.c.id)
Index("ix_jobs_owner_id", jobs.c.created_by, jobs.c.id)
Index("ix_jobs_type_id", jobs.c.type, jobs.c.id)
# A producer's oldest due job (one probe) and its jobs of a rare status.
Index("ix_jobs_owner_status_run_at", jobs.c.created_by, jobs.c.status, jobs.c.run_at)
# Latest failures and pruning: finished jobs by status and age (only finished ones, so an
# enqueue or a claim never writes to it).
_FINISHED = jobs.c.finished_at.is_not(None)
partial_index("ix_jobs_status_finished", jobs.c.status, jobs.c.finished_at, where=_FINISHED)
# The oldest due job of each type (metrics, the typed claims' "any due?").
partial_index("ix_jobs_pending_type", jobs.c.type, jobs.c.run_at, where=CLAIMABLE)
# The jobs waiting for parents, per owner (the dashboard counts them apart from due ones).
partial_index("ix_jobs_waiting", jobs.c.created_by, where=jobs.c.waiting_for.is_not(None))
# A group's members by status (its counts), and its callbacks.
partial_index("ix_jobs_group", jobs.c.group_id, jobs.c.status, where=jobs.c.group_id.is_not(None))
# The workers page: each worker's next lease expiry and last heartbeat, one probe each.
_RUNNING = jobs.c.status == "running"
partial_index("ix_jobs_running_worker", jobs.c.worker_id, jobs.c.lease_expires_at, where=_RUNNING)
partial_index("ix_jobs_running_seen", jobs.c.worker_id, jobs.c.updated_at, where=_RUNNING)
# Searching by idempotency key without its owner (admins, workers).
_KEYED = jobs.c.idempotency_key.is_not(None)
partial_index("ix_jobs_idempotency_key", jobs.c.idempotency_key, where=_KEYED)

# The active job holding a uniqueness key, in its producer's namespace or its parent's.
partial_index(
    "ix_jobs_unique",
    jobs.c.created_by,
    jobs.c.type,
    jobs.c.unique_key,
    jobs.c.parent_id,
    where=text("unique_key IS NOT NULL AND status IN ('pending', 'running')"),
)

# Job dependencies: one row per (parent, child). Finishing a parent finds its
# children by the primary key; deleting a child finds its rows by the child index.
# ``on_failure`` is the child's ``on_dependency_failure``: when this parent fails for good or
# is cancelled, 'cancel' cancels the child and 'run' only counts the parent as finished.
job_dependencies = Table(
    "job_dependencies",
    metadata,
    Column("parent_id", BigId, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("child_id", BigId, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("on_failure", String(8), nullable=False),
    CheckConstraint("on_failure IN ('cancel', 'run')", name="on_failure"),
    Index(None, "child_id"),
)

# Groups of jobs enqueued by one batch. ``unfinished`` and ``unsuccessful`` count
# members, moved in the transaction of each member's finish (and of an admin retry), so the one
# that finishes the last member sees ``unfinished`` reach 0 and enqueues the callbacks; the
# ``*_id`` columns are set once, so each callback is enqueued at most once (or refused once).
job_groups = Table(
    "job_groups",
    metadata,
    Column("id", BigId, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("created_by", Integer, ForeignKey("users.id"), nullable=False),
    Column("total", Integer, nullable=False),
    Column("unfinished", Integer, nullable=False),
    Column("unsuccessful", Integer, nullable=False, server_default=text("0")),
    Column("on_complete", JSONDocument, nullable=True),
    Column("on_success", JSONDocument, nullable=True),
    Column("on_complete_id", BigInteger, nullable=True),
    Column("on_success_id", BigInteger, nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime(), nullable=True),
    # Why a callback was not enqueued (its producer could not enqueue it): {which: reason}.
    Column("callbacks_refused", NullableDocument, nullable=True),
    CheckConstraint("unfinished >= 0 AND unsuccessful >= 0", name="counters"),
    sqlite_autoincrement=True,
)
# A job's children (its page lists them): only spawned jobs have an entry.
partial_index("ix_jobs_parent", jobs.c.parent_id, jobs.c.id, where=jobs.c.parent_id.is_not(None))
# A child's idempotency key, unique among its parent's children (ix_jobs_unique: both namespaces).
_CHILD_KEYED = jobs.c.child_key.is_not(None)
partial_index(
    "uq_jobs_child_key", jobs.c.parent_id, jobs.c.child_key, where=_CHILD_KEYED, unique=True
)

# Flask-Limiter's counters (see app/infra/ratelimit.py), shared by every process.
rate_limits = Table(
    "rate_limits",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("count", Integer, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index(None, "expires_at"),
)

job_events = Table(
    "job_events",
    metadata,
    Column("id", BigId, primary_key=True),
    Column("job_id", BigId, nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("from_status", String(16), nullable=True),
    Column("to_status", String(16), nullable=False),
    Column("actor", String(64), nullable=True),
    Column("attempt", Integer, nullable=True),
    Column("kind", String(32), nullable=False),
    Column("error", Text, nullable=True),
    Column("note", String(500), nullable=True),
    # The database refuses a kind the code does not know (migration 0003 adds new ones).
    one_of("kind", EventKind, name="kind"),
    # An event's job, on SQLite only. On PostgreSQL the check of every event's row against its
    # job was a tenth of the database's work per job (migration 0022): events are written only
    # by the statement or transaction that moves their job, and the jobs' DELETE trigger
    # deletes their events, as ON DELETE CASCADE does here.
    ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE").ddl_if(dialect="sqlite"),
    Index(None, "job_id", "id"),
    sqlite_autoincrement=True,
)

# Who did what, appended in the transaction of the action; only retention (AUDIT_RETENTION) and
# `flask audit prune` delete.
audit_events = Table(
    "audit_events",
    metadata,
    Column("id", BigId, primary_key=True),
    Column("at", UTCDateTime(), nullable=False),
    Column("actor", String(64), nullable=False),
    Column("action", String(32), nullable=False),
    Column("target", String(200), nullable=True),
    Column("details", JSONDocument, nullable=True),
    Column("client_address", String(64), nullable=True),
    Index(None, "at"),
    Index(None, "actor", "id"),
    Index(None, "action", "id"),
    sqlite_autoincrement=True,
)

# Periodic jobs (app/queue/schedules.py). next_run_at is the slot a tick claims with a
# compare-and-set; NULL while the schedule is disabled, so the due lookup skips it.
schedules = Table(
    "schedules",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(50), nullable=False, unique=True),
    Column("cron", String(100), nullable=False),
    Column("timezone", String(64), nullable=False, server_default="UTC"),
    Column("type", String(200), nullable=False),
    Column("payload", JSONDocument, nullable=False),
    Column("priority", SmallInteger, nullable=False, server_default=text(f"{_PRIORITY}")),
    Column("enabled", Boolean, nullable=False, server_default=text("true")),
    Column("catch_up", String(8), nullable=False, server_default="skip"),
    Column("next_run_at", UTCDateTime(), nullable=True),
    Column("last_run_at", UTCDateTime(), nullable=True),
    Column("created_by", Integer, ForeignKey("users.id"), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    # The partition of the jobs it enqueues (migration 0027); NULL: the partition null.
    Column("partition", String(job_fields.PARTITION.length), nullable=True),
    CheckConstraint("priority IN (0, 10, 20, 30)", name="priority"),
    CheckConstraint("catch_up IN ('skip', 'one')", name="catch_up"),
    CheckConstraint("enabled OR next_run_at IS NULL", name="disabled_never_due"),
    # The due lookup of every tick: a range scan of the head of this index.
    Index(None, "next_run_at"),
    sqlite_autoincrement=True,
)

# Locks held across transactions until expires_at (a bulk apply's "bulk",
# app/queue/usecases/bulk_runs.py).
locks = Table(
    "locks",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(64), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=False),
)

# What the last retention prune removed (one row, id 1): when, and how many jobs (per status),
# events and audit rows. The admins' retention page shows it.
retention_runs = Table(
    "retention_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("jobs", JSONDocument, nullable=False),  # {status: jobs deleted}
    Column("events", BigInteger, nullable=False),
    Column("audit_events", BigInteger, nullable=False),
)
