"""Why a due job waits for its partition: the explainer's ``partition_limit``, with the figures
a claim would count (read as they stand, not locked), kept apart from ``explain`` so that module
stays one reason per function."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from app.queue.rules.type_limits import TypeLimits
from app.queue.usecases.partition_limits import read_turn
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.timeutil import human_duration, iso
from app.storage.schema_partitions import NULL_PARTITION


def partition_held(
    conn: Connection, job: Job, limits: TypeLimits, now: datetime
) -> tuple[str, dict[str, Any]] | None:
    """The sentence and figures of ``partition_limit`` when the job's partition of its type has
    no room under the type's partition limits now; None when it has (or the type has none)."""
    if not limits.partitioned:
        return None
    part = job.partition or NULL_PARTITION
    turn = read_turn(conn, job.type, limits, now)
    if turn.room(part, now) > 0:
        return None
    named = f"partition {job.partition}" if job.partition else "the partition null"
    figures: dict[str, Any] = {"type": job.type, "partition": job.partition}
    cap, running = limits.partition_max_running, turn.running.get(part, 0)
    if cap is not None and running >= cap:
        return (
            f"{running:,} job(s) of its type {job.type} are running in {named} and "
            f"partition_max_running is {cap:,}: it waits until one of them finishes.",
            figures | {"partition_max_running": cap, "running": running},
        )
    rate = limits.partition_rate_limit
    assert rate is not None  # no room, and not for want of running slots
    start = rate.window_start(now)
    ends = start + timedelta(seconds=rate.seconds)
    return (
        f"{named.capitalize()} had its {rate.count:,} claim(s) of type {job.type} in this "
        f"{rate.unit} (partition_rate_limit {rate}); the next window opens in "
        f"{human_duration(ends - now)}, at {ends:%Y-%m-%d %H:%M:%S} UTC.",
        figures
        | {
            "partition_rate_limit": str(rate),
            "claims_in_window": turn.counted(part, now),
            "window_started_at": iso(start),
            "window_ends_at": iso(ends),
        },
    )
