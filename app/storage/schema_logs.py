"""The table of attempt logs: the lines a worker sent while it held an attempt of a job. On the
schema's ``metadata``, beside the tables of ``app.storage.schema``."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, Table, Text

from app.storage.schema import metadata
from app.storage.sqltypes import BigId, UTCDateTime

# One row per request of ``POST /jobs/{id}/logs``: its lines as one JSON array of strings
# (``lines``), their size in UTF-8 (``size``, what the per-attempt cap counts) and, on the
# attempt's oldest row, how many older lines the cap dropped (``dropped``). A row per request
# rather than per line: one key check and one index entry for up to 100 lines. Deleted with
# their job (ON DELETE CASCADE, by the job_id index), whichever path deletes it.
job_logs = Table(
    "job_logs",
    metadata,
    Column("id", BigId, primary_key=True),
    Column("job_id", BigId, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("lines", Text, nullable=False),
    Column("size", Integer, nullable=False),
    Column("dropped", Integer, nullable=False),
    Index(None, "job_id", "attempt", "id"),
    sqlite_autoincrement=True,
)
