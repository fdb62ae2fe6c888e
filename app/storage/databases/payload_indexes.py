"""The indexes that make a payload search fast: one expression index per key named in
PAYLOAD_SEARCH_KEYS, of the very expression the search's prefilter writes for a top-level value
(SQLite: ``json_extract(payload, '$."key"')``, ``app.queue.sql.dialects.sqlite_json``;
PostgreSQL: ``payload -> 'key'``, ``app.queue.sql.dialects.postgresql``). Their names are derived
from the key alone, so every process that migrates agrees on them; ``match`` (run by
``app.storage.migrate``) creates and drops them to match the setting. PostgreSQL gets no GIN
index of every payload: it would cost each job's insert, claim and finish far more than one
entry per configured key (docs/performance.md, "Payload search")."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

from sqlalchemy import Connection

PREFIX = "ix_jobs_payload_key_"
MAX_KEY_LENGTH = 100
# A key stored as itself in a payload's JSON text, so that a path names it: printable ASCII
# without the characters JSON escapes (" and \) or a SQL literal would (').
_PATH_SAFE = frozenset(chr(c) for c in range(0x20, 0x7F)) - set("\"\\'")


def path_safe(key: str) -> bool:
    """Whether ``key`` can be named in a JSON path that SQLite matches as stored."""
    return 0 < len(key) <= MAX_KEY_LENGTH and all(char in _PATH_SAFE for char in key)


def path_literal(key: str) -> str:
    """The SQL literal of top-level ``key``'s JSON path (``'$."key"'``): quoted, so that a dot or
    a ``$`` in the key is part of the name. Only for ``path_safe`` keys."""
    if not path_safe(key):
        raise ValueError(f"{key!r} cannot be named in a JSON path")
    return f"'$.\"{key}\"'"


def index_name(key: str) -> str:
    """The index of ``key``: the prefix, the key's letters and digits, and a digest that tells
    apart keys those leave alike."""
    letters = re.sub("[^a-z0-9]+", "_", key.lower()).strip("_")[:24]
    return f"{PREFIX}{letters}_{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def key_literal(key: str) -> str:
    """The SQL literal of top-level ``key`` itself (``'key'``). Only for ``path_safe`` keys."""
    if not path_safe(key):
        raise ValueError(f"{key!r} cannot be named in SQL")
    return f"'{key}'"


def sqlite_create_sql(key: str) -> str:
    """SQLite's DDL of ``key``'s index (a no-op when it exists)."""
    return (
        f"CREATE INDEX IF NOT EXISTS {index_name(key)} "
        f"ON jobs (json_extract(payload, {path_literal(key)}))"
    )


def postgresql_create_sql(key: str) -> str:
    """PostgreSQL's DDL of ``key``'s index (a no-op when it exists)."""
    return f"CREATE INDEX IF NOT EXISTS {index_name(key)} ON jobs ((payload -> {key_literal(key)}))"


def match(conn: Connection, keys: Collection[str]) -> tuple[list[str], list[str]]:
    """Create the index of each of ``keys`` that lacks one and drop those of keys no longer
    named; the names created and dropped. Safe when several processes migrate at once: they
    take turns (SQLite's transactions begin by taking the write lock; on PostgreSQL an advisory
    lock), and each sees what the one before it did."""
    if conn.dialect.name == "sqlite":
        listed, create = _SQLITE_INDEXES, sqlite_create_sql
    else:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_INDEXING_LOCK})")
        listed, create = _POSTGRESQL_INDEXES, postgresql_create_sql
    present = {row[0] for row in conn.exec_driver_sql(listed) if row[0].startswith(PREFIX)}
    wanted = {index_name(key): key for key in keys}
    dropped = sorted(present - set(wanted))
    for name in dropped:
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
    created = sorted(name for name in wanted if name not in present)
    for name in created:
        conn.exec_driver_sql(create(wanted[name]))
    return created, dropped


_SQLITE_INDEXES = "SELECT name FROM sqlite_master WHERE type = 'index'"
_POSTGRESQL_INDEXES = "SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'"
_INDEXING_LOCK = 0x7051_5345_4152  # any constant no other lock of the app takes
