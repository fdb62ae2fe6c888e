"""Job totals for /metrics, rolled up from ``job_events`` into ``metric_counters``.

Each scrape folds the events added since the last one into the totals, in one short
transaction, so every app server reports the same monotonic counters and a scrape reads
only new events (a primary-key range), never the whole history.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, insert, select, update
from sqlalchemy.sql import func

from app.queue.vocabulary.states import TERMINAL, JobStatus
from app.storage.schema import CLAIMABLE, job_events, jobs
from app.storage.schema_figures import metric_counters, metric_rollup

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
# Events folded per round: a round's rows are held in the scraping process at once (rounds of
# 5,000 raised its peak memory by 3 MB after a burst of 3,000 jobs, rounds of 1,000 by 0.5).
BATCH = 1_000
MAX_ROUNDS = 20  # per scrape (~20,000 events): a long backlog is caught up over several scrapes
ENQUEUED, FINISHED = "enqueued", "finished"
WAIT, RUN = "wait", "run"  # histograms: labels are bucket bounds, "sum" and "count"
Key = tuple[str, str, str]  # (name, job type, label)


def _last_event_id(conn: Connection) -> int:
    """The watermark, locked against concurrent scrapes (created on first use)."""
    query = select(metric_rollup.c.last_event_id).where(metric_rollup.c.id == 1)
    last = conn.execute(query.with_for_update()).scalar()
    if last is None:
        conn.execute(insert(metric_rollup).values(id=1, last_event_id=0))
        return 0
    return int(last)


def _new_events(conn: Connection, after: int) -> list[Any]:
    """Events after the watermark with their job's type and due time and the previous
    event's time (an index probe on (job_id, id) per event)."""
    previous = job_events.alias("previous")
    previous_at = (
        select(previous.c.at)
        .where(previous.c.job_id == job_events.c.job_id, previous.c.id < job_events.c.id)
        .order_by(previous.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    query = (
        select(
            job_events.c.id,
            job_events.c.kind,
            job_events.c.from_status,
            job_events.c.to_status,
            job_events.c.at,
            jobs.c.type,
            jobs.c.run_at,
            previous_at.label("previous_at"),
        )
        .join(jobs, jobs.c.id == job_events.c.job_id)
        .where(job_events.c.id > after)
        .order_by(job_events.c.id)
        .limit(BATCH)
    )
    return list(conn.execute(query))


_LABELS = [repr(bound) for bound in BUCKETS]
_TERMINAL = frozenset(status.value for status in TERMINAL)
_RUNNING = JobStatus.RUNNING.value


def _observe(deltas: dict[Key, float], name: str, job_type: str, seconds: float) -> None:
    seconds = max(seconds, 0.0)
    for label in _LABELS[bisect_left(BUCKETS, seconds) :]:  # cumulative: every bound >= it
        deltas[(name, job_type, label)] += 1
    deltas[(name, job_type, "count")] += 1
    deltas[(name, job_type, "sum")] += seconds


def _fold(rows: Iterable[Any], deltas: dict[Key, float]) -> None:
    for _id, kind, from_status, to_status, at, job_type, run_at, previous_at in rows:
        if kind == "enqueued":
            deltas[(ENQUEUED, job_type, "")] += 1
        if to_status in _TERMINAL:
            deltas[(FINISHED, job_type, to_status)] += 1
        if previous_at is None:
            continue
        if to_status == _RUNNING:
            # Waiting starts when the job became due: its run_at if that came later than the
            # event that made it pending (a delay or a backoff), else that event.
            due: datetime = previous_at
            if run_at is not None and due < run_at <= at:
                due = run_at
            _observe(deltas, WAIT, job_type, (at - due).total_seconds())
        elif from_status == _RUNNING and kind in ("completed", "failed"):
            _observe(deltas, RUN, job_type, (at - previous_at).total_seconds())


def _store(conn: Connection, deltas: dict[Key, float]) -> None:
    existing = {
        (r.name, r.type, r.label) for r in conn.execute(select(metric_counters).with_for_update())
    }
    c = metric_counters.c
    for (name, job_type, label), delta in deltas.items():
        if (name, job_type, label) in existing:
            conn.execute(
                update(metric_counters)
                .where(and_(c.name == name, c.type == job_type, c.label == label))
                .values(value=c.value + delta)
            )
        else:
            conn.execute(
                insert(metric_counters).values(name=name, type=job_type, label=label, value=delta)
            )


def roll_up(conn: Connection) -> int:
    """Fold new events into the totals (at most ``MAX_ROUNDS * BATCH``); returns how many."""
    last = _last_event_id(conn)
    start = last
    deltas: dict[Key, float] = defaultdict(float)
    for _ in range(MAX_ROUNDS):
        rows = _new_events(conn, last)
        if not rows:
            break
        _fold(rows, deltas)
        last = rows[-1].id
        if len(rows) < BATCH:
            break
    if last != start:
        _store(conn, deltas)
        conn.execute(
            update(metric_rollup).where(metric_rollup.c.id == 1).values(last_event_id=last)
        )
    return last - start


def totals(conn: Connection) -> dict[Key, float]:
    """Every rolled-up total by (name, type, label)."""
    return {(r.name, r.type, r.label): r.value for r in conn.execute(select(metric_counters))}


def oldest_due(conn: Connection, job_types: Iterable[str], now: datetime) -> dict[str, datetime]:
    """The run_at of the oldest due pending job of each type: one index probe per type."""
    found = {}
    for job_type in job_types:
        oldest = conn.execute(
            select(func.min(jobs.c.run_at)).where(
                CLAIMABLE, jobs.c.type == job_type, jobs.c.run_at <= now
            )
        ).scalar()
        if oldest is not None:
            found[job_type] = oldest
    return found
