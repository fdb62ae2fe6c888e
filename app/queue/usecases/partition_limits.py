"""Claims under per-partition flow control: of a type with a ``partition_max_running`` or a
``partition_rate_limit``, no partition runs more jobs, or has more claims in a window, than its
limit, and a partition at its limit never keeps a claim from the next partition's jobs.

A claim of such a type holds the type's turn (``claim_limits`` locks its ``type_claim_windows``
row), counts what runs of the type per partition and reads the partitions' rate windows, then
picks its jobs in the fair order (``partitions.fair_head``), passing over those of a partition
without room, and claims only the jobs it picked. The jobs without a partition are one more
partition. A claim looks through at most ``SCAN_LIMIT`` due jobs for ones with room.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from app.queue.rules import edges, type_limits
from app.queue.rules.type_limits import TypeLimits
from app.queue.sql import partition_limits as partition_limits_sql
from app.queue.sql import partitions as partitions_sql
from app.queue.sql.edges import SPARE, TypeFilter
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.limits import Window
from app.storage.schema_partitions import NULL_PARTITION

SCAN_LIMIT = 1_024  # due jobs a claim looks through for ones whose partition has room
RECHECK = timedelta(seconds=0.5)  # as claim_limits': a running job may finish any time


@dataclass
class PartitionTurn:
    """What a claim read about one type's partitions while holding the type's turn, and what
    it took of each since."""

    limits: TypeLimits
    running: dict[str, int]
    windows: dict[str, Window]
    taken: Counter[str] = field(default_factory=Counter)

    def counted(self, partition: str, now: datetime) -> int:
        """The claims of ``partition`` already counted in the window of ``now``."""
        rate = self.limits.partition_rate_limit
        return (
            0 if rate is None else type_limits.window_claims(rate, self.windows.get(partition), now)
        )

    def room(self, partition: str, now: datetime) -> int:
        """How many more jobs of ``partition`` this claim may hand out."""
        taken = self.taken[partition]
        return type_limits.room(
            self.limits.partition_max_running,
            self.limits.partition_rate_limit,
            self.running.get(partition, 0) + taken,
            self.counted(partition, now) + taken,
        )

    def next_chance(self, partition: str, now: datetime) -> datetime:
        """When ``partition`` may have room again: its next rate window when this one is full,
        else soon."""
        rate = self.limits.partition_rate_limit
        if rate is not None and self.counted(partition, now) + self.taken[partition] >= rate.count:
            return rate.window_start(now) + timedelta(seconds=rate.seconds)
        return now + RECHECK


def read_turn(conn: Connection, job_type: str, limits: TypeLimits, now: datetime) -> PartitionTurn:
    """What runs of ``job_type`` per partition and its partitions' current windows (each read
    only when the type has that limit)."""
    running, windows = {}, {}
    if limits.partition_max_running is not None:
        running = partition_limits_sql.running_by_partition(conn, job_type)
    if (rate := limits.partition_rate_limit) is not None:
        windows = partition_limits_sql.windows(conn, job_type, rate.window_start(now))
    return PartitionTurn(limits, running, windows)


@dataclass
class PartitionClaims:
    """One claim's partition limits: the turns of its types with partition limits, the
    partitions it passed over, and the picking, noting and counting of its jobs."""

    turns: dict[str, PartitionTurn]
    held: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def read(
        cls, conn: Connection, limits: Mapping[str, TypeLimits], now: datetime
    ) -> PartitionClaims:
        """The turns of the types in ``limits`` with partition limits (paused ones need none);
        the caller holds the types' turns."""
        return cls(
            {
                name: read_turn(conn, name, limit, now)
                for name, limit in sorted(limits.items())
                if limit.partitioned and not limit.paused
            }
        )

    def pick(
        self,
        conn: Connection,
        *,
        want: int,
        now: datetime,
        types: tuple[str, ...] | None,
        except_types: tuple[str, ...],
    ) -> list[int]:
        """The ids of up to ``want`` (and a few spare) due jobs in fair order, of ``types``
        (else of any type but ``except_types``), none beyond its partition's room."""
        type_filter: TypeFilter = "any"
        listed: tuple[str, ...] = ()
        if types is not None:
            type_filter, listed = "only", types
        elif except_types:
            type_filter, listed = "except", except_types
        scan = want + SPARE
        while True:
            head = partitions_sql.fair_head(
                conn, want=scan, now=now, type_filter=type_filter, listed=listed
            )
            picked = self._within_room(conn, head, now)
            if len(picked) >= want or len(head) < scan or scan >= SCAN_LIMIT:
                return picked
            scan = min(scan * 4, SCAN_LIMIT)  # partitions without room filled the head

    def claim(
        self,
        conn: Connection,
        *,
        limit: int,
        types: tuple[str, ...] | None,
        except_types: tuple[str, ...],
        **options: Any,
    ) -> list[Job]:
        """``edges.claim`` of up to ``limit`` jobs (``options``: its other arguments), of the
        jobs picked within their partitions' room when a type has partition limits; the jobs
        count against that room for the rest of this claim."""
        picked = None
        if self.turns:
            picked = self.pick(
                conn, want=limit, now=options["now"], types=types, except_types=except_types
            )
        claimed = edges.claim(
            conn, limit=limit, types=types, except_types=except_types, picked=picked, **options
        )
        self.note(claimed)
        return claimed

    def _within_room(self, conn: Connection, head: Sequence[int], now: datetime) -> list[int]:
        keys = partition_limits_sql.keys_of(conn, head)
        room: dict[tuple[str, str], int] = {}
        picked = []
        for job_id in head:
            key = keys.get(job_id)
            if key is None:
                continue  # gone since the head was read
            turn = self.turns.get(key[0])
            if turn is not None:
                left = room[key] if key in room else turn.room(key[1], now)
                if left == 0:
                    self.held.add(key)
                    continue
                room[key] = left - 1
            picked.append(job_id)
        return picked

    def note(self, claimed: Sequence[Job]) -> None:
        """Count ``claimed`` against their partitions' room for the rest of this claim."""
        for job in claimed:
            if (turn := self.turns.get(job.type)) is not None:
                turn.taken[job.partition or NULL_PARTITION] += 1

    def count(self, conn: Connection, now: datetime) -> None:
        """Add this claim's jobs to their partitions' rate windows."""
        for name, turn in self.turns.items():
            rate = turn.limits.partition_rate_limit
            if rate is not None and turn.taken:
                claims = {part: turn.counted(part, now) + n for part, n in turn.taken.items()}
                partition_limits_sql.count_claims(conn, name, rate.window_start(now), claims)

    def held_until(self, now: datetime) -> datetime | None:
        """When a partition this claim passed over may have room again (None: none held)."""
        return min((self.turns[t].next_chance(p, now) for t, p in self.held), default=None)
