"""The busiest partitions of each job type (operators: /metrics and the types page): a few
partitions by name and the rest summed, so the figures never grow with the partitions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from app.queue.sql import partition_figures as partition_figures_sql
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

    @property
    def partitioned(self) -> bool:
        """Whether any job counted has a partition."""
        named = (*self.due.named, *self.running.named)
        return any(partition is not None for partition, _ in named)


def _busiest(counted: partition_figures_sql.Counted) -> Busiest:
    named, total = counted
    return Busiest(tuple(named), total - sum(n for _, n in named))


def busiest(
    conn: Connection, job_types: Iterable[str], now: datetime
) -> dict[str, PartitionFigures]:
    """Each of ``job_types``' busiest partitions by due and by running jobs (types with
    neither get empty figures): a bounded read per type, and one of the running jobs."""
    running = partition_figures_sql.running(conn)
    return {
        job_type: PartitionFigures(
            _busiest(partition_figures_sql.due(conn, job_type, now)),
            _busiest(running.get(job_type, ([], 0))),
        )
        for job_type in job_types
    }
