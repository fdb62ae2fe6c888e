"""Where the fair turns between partitions stand: per priority (a row each, written by
migration 0027), the partition a claim served last (``app.queue.sql.partitions``). On the
schema's ``metadata``, beside the tables of ``app.storage.schema``."""

from __future__ import annotations

from sqlalchemy import Column, SmallInteger, String, Table

from app.queue.vocabulary import job_fields
from app.storage.schema import metadata
from app.storage.sqltypes import UTCDateTime

# The partition null in ``partition_turns`` (a name no job may have: partitions are 1..64
# characters).
NULL_PARTITION = ""

partition_turns = Table(
    "partition_turns",
    metadata,
    Column("priority", SmallInteger, primary_key=True, autoincrement=False),
    Column("partition", String(job_fields.PARTITION.length), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)
