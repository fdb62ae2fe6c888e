"""The busiest partitions of each job type (operators: /metrics and the types page): a few
partitions by name and the rest summed, so the figures never grow with the partitions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from app.queue.sql import partition_figures as figures_sql
from app.queue.sql.partition_figures import BUSIEST, DUE_SAMPLE, RUNNING_SAMPLE

__all__ = ["BUSIEST", "DUE_SAMPLE", "RUNNING_SAMPLE", "Busiest", "PartitionFigures", "busiest"]


@dataclass(frozen=True)
class Busiest:
    """One figure of a type's partitions: the ``BUSIEST`` largest, largest first (None: the
    jobs without a partition), and what the others hold together."""

    named: tuple[tuple[str | None, int], ...] = ()
    rest: int = 0

    @property
    def total(self) -> int:
        """The jobs counted, named or not."""
        return self.rest + sum(n for _, n in self.named)


@dataclass(frozen=True)
class PartitionFigures:
    """A type's due jobs (among its oldest ``DUE_SAMPLE``) and running jobs per partition."""

    due: Busiest = field(default_factory=Busiest)
    running: Busiest = field(default_factory=Busiest)


def _by_type(rows: figures_sql.Ranked) -> dict[str, Busiest]:
    named: dict[str, list[tuple[str | None, int]]] = {}
    rest: dict[str, int] = {}
    for job_type, place, part, n in rows:  # in place order: 0 (the rest) first
        if place:
            named.setdefault(job_type, []).append((part, n))
        else:
            rest[job_type] = n
    return {
        job_type: Busiest(tuple(named.get(job_type, ())), rest.get(job_type, 0))
        for job_type in {*named, *rest}
    }


def busiest(
    conn: Connection, job_types: Iterable[str], now: datetime
) -> dict[str, PartitionFigures]:
    """Each of ``job_types``' busiest partitions by due and by running jobs (types with
    neither get empty figures): a bounded read per type and one for all running jobs."""
    running = _by_type(figures_sql.running(conn))
    found = {}
    for job_type in job_types:
        due = _by_type(figures_sql.due(conn, job_type, now)).get(job_type, Busiest())
        found[job_type] = PartitionFigures(due, running.get(job_type, Busiest()))
    return found
