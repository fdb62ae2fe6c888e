"""The SQL of fair turns between partitions: the partitions that hold claimable jobs of one
priority, in the order of their names from where that priority's turn stands, each one's next
due jobs, and the turn itself (``partition_turns``). Read only when partitioned jobs are
claimable: a queue without them never runs these statements."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, bindparam, select, text, update

from app.queue.sql import dialects
from app.queue.sql.dialects import Dialect
from app.queue.sql.prepared import Prepared
from app.storage.schema_partitions import NULL_PARTITION, partition_turns
from app.storage.sqltypes import UTCDateTime

# A claim's type condition, as in ``edges``: any type, only the listed ones, or any but them.
_TYPES = {"any": "", "only": " AND type IN ({listed})", "except": " AND type NOT IN ({listed})"}
# The terms of ix_jobs_claim_partition (literal, so its partial index serves them).
_NAMED = "status = 'pending' AND waiting_for IS NULL AND partition IS NOT NULL"
_UNNAMED = "status = 'pending' AND waiting_for IS NULL AND partition IS NULL"


def _timed(sql: list[str]) -> Prepared:
    """The statement, its ``:now`` bound as the columns store time (SQLite compares text: a
    bare datetime would be bound in another format, and a job due to the microsecond missed)."""
    return Prepared(text(" ".join(sql)).bindparams(bindparam("now", type_=UTCDateTime())))


def _types(type_filter: str, count: int) -> str:
    listed = ", ".join(f":type_{i}" for i in range(count))
    return _TYPES[type_filter].format(listed=listed)


@lru_cache(maxsize=32)
def _walk(dialect: Dialect, bounded: bool, type_filter: str, count: int) -> Prepared:
    """Up to ``:scan`` partitions of priority ``:priority`` holding claimable jobs, after
    ``:after`` (and up to ``:upto`` when ``bounded``) in name order, each with the id of its
    due job at ``:offset`` in FIFO order (NULL when it has none due): one probe of
    ix_jobs_claim_partition per partition, never a scan of a partition's backlog."""
    jobs = "jobs" + dialect.index_hint("ix_jobs_claim_partition")
    after = ["SELECT partition FROM", jobs, "WHERE", _NAMED, "AND priority = :priority"]
    after += ["AND partition <= :upto"] if bounded else []
    head = ["SELECT id FROM", jobs, "WHERE", _NAMED, "AND priority = :priority"]
    head += ["AND partition = walk.part AND run_at <= :now", _types(type_filter, count)]
    head += ["ORDER BY run_at, id LIMIT 1 OFFSET :offset"]
    sql = ["WITH RECURSIVE walk(part, seen) AS (SELECT (", *after]
    sql += ["AND partition > :after ORDER BY partition LIMIT 1), 1 UNION ALL SELECT (", *after]
    sql += ["AND partition > walk.part ORDER BY partition LIMIT 1), seen + 1 FROM walk"]
    sql += ["WHERE walk.part IS NOT NULL AND seen < :scan) SELECT part, (", *head]
    sql += [") FROM walk WHERE part IS NOT NULL"]
    return _timed(sql)


@lru_cache(maxsize=32)
def _unnamed(dialect: Dialect, type_filter: str, count: int) -> Prepared:
    """The ids of the due jobs of priority ``:priority`` without a partition, FIFO, from
    ``:offset``: the claim index's range of that priority, read past the partitioned ones."""
    jobs = "jobs" + dialect.index_hint("ix_jobs_claim")
    sql = ["SELECT id FROM", jobs, "WHERE", _UNNAMED, "AND priority = :priority"]
    sql += ["AND run_at <= :now", _types(type_filter, count)]
    sql += ["ORDER BY run_at, id LIMIT :limit OFFSET :offset"]
    return _timed(sql)


@lru_cache(maxsize=32)
def _one(dialect: Dialect, type_filter: str, count: int) -> Prepared:
    """The ids of the due jobs of one partition and priority, FIFO, from ``:offset``."""
    jobs = "jobs" + dialect.index_hint("ix_jobs_claim_partition")
    sql = ["SELECT id FROM", jobs, "WHERE", _NAMED, "AND priority = :priority"]
    sql += ["AND partition = :part AND run_at <= :now", _types(type_filter, count)]
    sql += ["ORDER BY run_at, id LIMIT :limit OFFSET :offset"]
    return _timed(sql)


class Turns:
    """The partitions' turns at one priority, as one claim walks them: the partitions after the
    one served last (``cursor``; ``NULL_PARTITION``: the partition null), then the partition
    null, then those from the first name up to the cursor's."""

    def __init__(
        self,
        conn: Connection,
        *,
        priority: int,
        cursor: str,
        now: datetime,
        type_filter: str,
        listed: tuple[str, ...],
    ) -> None:
        self.conn = conn
        self.dialect = dialects.of(conn)
        self.cursor = cursor
        self.type_filter = type_filter
        self.count = len(listed)
        self.params: dict[str, Any] = {"priority": priority, "now": now}
        self.params |= {f"type_{i}": name for i, name in enumerate(listed)}

    def heads(self, offset: int, need: int) -> list[tuple[str, int]]:
        """Up to ``need`` (partition, job id) pairs in turn order: each partition's due job at
        ``offset`` (the round of a claim of several jobs), partitions without one left out."""
        found = self._named(after=self.cursor, upto=None, offset=offset, need=need)
        if len(found) < need:
            found += [(NULL_PARTITION, i) for i in self.unnamed(offset, 1)]
        if len(found) < need and self.cursor != NULL_PARTITION:
            left = need - len(found)
            found += self._named(after=NULL_PARTITION, upto=self.cursor, offset=offset, need=left)
        return found[:need]

    def _named(
        self, *, after: str, upto: str | None, offset: int, need: int
    ) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        scan = need + 4  # partitions per statement: a few may have nothing due
        statement = _walk(self.dialect, upto is not None, self.type_filter, self.count)
        while len(found) < need:
            params = self.params | {"after": after, "upto": upto, "scan": scan, "offset": offset}
            rows = statement.rows(self.conn, params)
            found += [(part, job_id) for part, job_id in rows if job_id is not None]
            if len(rows) < scan:
                break
            after = rows[-1][0]
        return found

    def unnamed(self, offset: int, limit: int) -> list[int]:
        """The due jobs without a partition, FIFO, from ``offset``."""
        statement = _unnamed(self.dialect, self.type_filter, self.count)
        params = self.params | {"offset": offset, "limit": limit}
        return [row[0] for row in statement.rows(self.conn, params)]

    def rest(self, partition: str, offset: int, limit: int) -> list[int]:
        """The due jobs of one partition, FIFO, from ``offset`` (``NULL_PARTITION``: those
        without a partition)."""
        if partition == NULL_PARTITION:
            return self.unnamed(offset, limit)
        statement = _one(self.dialect, self.type_filter, self.count)
        params = self.params | {"part": partition, "offset": offset, "limit": limit}
        return [row[0] for row in statement.rows(self.conn, params)]


@lru_cache(maxsize=4)
def _move(dialect: Dialect) -> Prepared:
    """The turn's UPDATE of one priority, unless another claim's transaction holds its row
    (that claim moves it instead): a claim never waits for another's turn."""
    row = select(partition_turns.c.priority).where(
        partition_turns.c.priority == bindparam("at_priority")
    )
    return Prepared(
        update(partition_turns)
        .where(partition_turns.c.priority.in_(dialect.skip_locked(row)))
        .values(partition=bindparam("served"), updated_at=bindparam("now"))
    )


def move_cursors(conn: Connection, served: Mapping[int, str], now: datetime) -> None:
    """Record the partition each priority served last (a later claim starts after it)."""
    move = _move(dialects.of(conn))
    for priority, name in served.items():
        move.run(conn, {"at_priority": priority, "served": name, "now": now})


@lru_cache(maxsize=32)
def _top(dialect: Dialect, type_filter: str, count: int) -> Prepared:
    """The highest priority below ``:below`` with a due job (one probe of the claim index) and
    where its turn stands: the partition its last fair claim served last (NULL: none yet)."""
    jobs = "jobs" + dialect.index_hint("ix_jobs_claim")
    sql = ["SELECT priority, (SELECT partition FROM partition_turns AS turn"]
    sql += ["WHERE turn.priority = jobs.priority) FROM", jobs]
    sql += ["WHERE status = 'pending' AND waiting_for IS NULL"]
    sql += ["AND priority < :below AND run_at <= :now", _types(type_filter, count)]
    sql += ["ORDER BY priority DESC, run_at, id LIMIT 1"]
    return _timed(sql)


def fair_head(
    conn: Connection, *, want: int, now: datetime, type_filter: str, listed: tuple[str, ...]
) -> list[int]:
    """The ids of up to ``want`` due jobs in fair order (docs/architecture.md, "Fair turns"):
    priority first; within a priority, partitions in turn from where the last claim left off
    (``move_cursors``), one job each per round; FIFO within a partition. Nothing is locked:
    the claim's UPDATE takes those no other claim holds."""
    params = {"now": now} | {f"type_{i}": name for i, name in enumerate(listed)}
    top = _top(dialects.of(conn), type_filter, len(listed))
    picked: list[int] = []
    below = 1 << 15
    while len(picked) < want:
        row = top.row(conn, params | {"below": below})
        if row is None:
            break
        below, turn = int(row[0]), row[1]
        turns = Turns(
            conn,
            priority=below,
            cursor=NULL_PARTITION if turn is None else turn,
            now=now,
            type_filter=type_filter,
            listed=listed,
        )
        picked += [job_id for _, job_id in _rounds(turns, want - len(picked))]
    return picked


def _rounds(turns: Turns, need: int) -> list[tuple[str, int]]:
    """Round robin at one priority: each partition's first due job in turn, then (when fewer
    partitions than ``need`` have one) each one's second, and so on."""
    taken = turns.heads(0, need)
    active = [partition for partition, _ in taken]
    offset = 1
    while active and len(taken) < need:
        if len(active) == 1:  # one partition left: the rest is FIFO
            (partition,) = active
            rest = turns.rest(partition, offset, need - len(taken))
            return taken + [(partition, job_id) for job_id in rest]
        still = []
        for partition in active:
            found = turns.rest(partition, offset, 1) if len(taken) < need else []
            taken += [(partition, job_id) for job_id in found]
            still += [partition] if found else []
        active, offset = still, offset + 1
    return taken
