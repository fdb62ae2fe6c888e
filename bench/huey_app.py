"""huey, the peer of the end-to-end bench: SqliteHuey at the same ``synchronous`` as queuelog.

The consumer imports this module (``huey_consumer bench.huey_app.huey``); the database file and
the ``synchronous`` level come from the environment the bench sets.
"""

from __future__ import annotations

import os
import time
from typing import Any

from huey import SqliteHuey
from huey.storage import SqliteStorage

SYNCHRONOUS = os.environ.get("BENCH_HUEY_SYNCHRONOUS", "FULL")


class DurableStorage(SqliteStorage):
    """huey's own ``fsync=False`` means ``synchronous=OFF``; set queuelog's level instead."""

    def _create_connection(self) -> Any:
        conn = super()._create_connection()
        conn.execute(f"pragma synchronous={SYNCHRONOUS}")
        return conn


huey = SqliteHuey(
    "bench",
    filename=os.environ.get("BENCH_HUEY_FILE", "huey-bench.sqlite3"),
    journal_mode="wal",
    storage_class=DurableStorage,
)


@huey.task()
def noop() -> bool:
    """A no-op job (its stored result counts it as done)."""
    return True


@huey.task()
def picked_up() -> float:
    """Record when a consumer started the job (for pickup latency)."""
    return time.time()
