"""The Prometheus text exposition: job families from the database, HTTP families per process."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.multiprocess import MultiProcessCollector

from app.monitoring import rollup
from app.queue.usecases.partition_figures import Busiest, PartitionFigures
from app.queue.vocabulary.states import JobStatus

# The partition label of the jobs without a partition, and of the partitions not named (their
# sum): names no partition may have (partitions are letters, digits and . _ : -).
NO_PARTITION, OTHER_PARTITIONS = "(none)", "(other)"


@dataclass(frozen=True)
class JobFigures:
    """What one scrape read from the database."""

    now: datetime
    job_types: Sequence[str]
    counts: list[tuple[str, str, int]]
    oldest_due: dict[str, datetime]
    totals: dict[rollup.Key, float]
    paused: Sequence[str]  # the types no claim hands out now
    # Pending jobs per type that wait for unfinished parents (workflows): not waiting work.
    held_by_dependencies: Mapping[str, int] = field(default_factory=dict)
    # Per type, the busiest partitions by due and by running jobs.
    partitions: Mapping[str, PartitionFigures] = field(default_factory=dict)

    def waiting(self, job_type: str) -> tuple[int, float]:
        """The type's waiting work: pending jobs a worker could be handed, and the age of the
        oldest due one. The one place that says what is not waiting work, so an alert on it
        does not fire for a pause: a paused type's jobs, jobs waiting for their parents."""
        if job_type in self.paused:
            return 0, 0.0
        counts = {(status, name): n for status, name, n in self.counts}
        pending = counts.get((JobStatus.PENDING.value, job_type), 0)
        pending -= self.held_by_dependencies.get(job_type, 0)
        due = self.oldest_due.get(job_type)
        return max(pending, 0), max((self.now - due).total_seconds(), 0.0) if due else 0.0


class JobCollector:
    """Turns ``JobFigures`` into metric families (configured types appear even at zero)."""

    def __init__(self, figures: JobFigures) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        figures = self.figures
        types = sorted({*figures.job_types, *(t for _, t, _ in figures.counts)})
        jobs = GaugeMetricFamily(
            "queuelog_jobs", "Jobs by status and type.", labels=["status", "type"]
        )
        counts = {(status, job_type): n for status, job_type, n in figures.counts}
        for job_type in types:
            for status in JobStatus:
                jobs.add_metric([status.value, job_type], counts.get((status.value, job_type), 0))
        yield jobs
        oldest = GaugeMetricFamily(
            "queuelog_oldest_due_job_age_seconds",
            "Age of the oldest pending job whose run_at has passed (0 when none).",
            labels=["type"],
        )
        for job_type in types:
            due = figures.oldest_due.get(job_type)
            age = (figures.now - due).total_seconds() if due else 0.0
            oldest.add_metric([job_type], max(age, 0.0))
        yield oldest
        paused = GaugeMetricFamily(
            "queuelog_type_paused",
            "1 while an admin or the configuration pauses the type (its jobs wait), else 0.",
            labels=["type"],
        )
        for job_type in types:
            paused.add_metric([job_type], 1.0 if job_type in figures.paused else 0.0)
        yield paused
        yield from self._waiting(types)
        yield from self._partitions(types)
        yield from self._counters(types)
        for name, family, doc in (
            (rollup.WAIT, "queuelog_job_wait_seconds", "From due to claimed."),
            (rollup.RUN, "queuelog_job_run_seconds", "From claimed to completed or failed."),
        ):
            yield self._histogram(types, name, family, doc)

    def _waiting(self, types: list[str]) -> Iterator[Metric]:
        """Waiting work (``JobFigures.waiting``): what alerts should watch."""
        count = GaugeMetricFamily(
            "queuelog_jobs_waiting",
            "Pending jobs a worker could be handed (paused types and jobs waiting for their "
            "parents left out; jobs scheduled for later included).",
            labels=["type"],
        )
        age = GaugeMetricFamily(
            "queuelog_oldest_waiting_job_age_seconds",
            "Age of the oldest due pending job a worker could be handed (0 when none, and "
            "for a paused type).",
            labels=["type"],
        )
        for job_type in types:
            waiting, oldest = self.figures.waiting(job_type)
            count.add_metric([job_type], waiting)
            age.add_metric([job_type], oldest)
        yield count
        yield age

    def _partitions(self, types: list[str]) -> Iterator[Metric]:
        """The busiest partitions of each type by name, the others summed: at most
        ``BUSIEST + 1`` series per type and figure, however many partitions there are."""
        due = GaugeMetricFamily(
            "queuelog_partition_jobs_due",
            "Due jobs (pending, claimable, run_at passed) of the type's busiest partitions "
            'among its oldest due jobs; partition="(other)" sums the other partitions.',
            labels=["type", "partition"],
        )
        running = GaugeMetricFamily(
            "queuelog_partition_jobs_running",
            "Running jobs of the type's busiest partitions; "
            'partition="(other)" sums the other partitions.',
            labels=["type", "partition"],
        )
        for job_type in types:
            figures = self.figures.partitions.get(job_type, PartitionFigures())
            _busiest(due, job_type, figures.due)
            _busiest(running, job_type, figures.running)
        yield due
        yield running

    def _counters(self, types: list[str]) -> Iterator[Metric]:
        totals = self.figures.totals
        enqueued = CounterMetricFamily("queuelog_jobs_enqueued", "Jobs enqueued.", labels=["type"])
        finished = CounterMetricFamily(
            "queuelog_jobs_finished",
            "Jobs that reached a final status, by outcome.",
            labels=["type", "outcome"],
        )
        for job_type in types:
            enqueued.add_metric([job_type], totals.get((rollup.ENQUEUED, job_type, ""), 0.0))
            for outcome in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED):
                value = totals.get((rollup.FINISHED, job_type, outcome.value), 0.0)
                finished.add_metric([job_type, outcome.value], value)
        yield enqueued
        yield finished

    def _histogram(self, types: list[str], name: str, family: str, doc: str) -> Metric:
        totals = self.figures.totals
        histogram = HistogramMetricFamily(family, doc, labels=["type"])
        for job_type in types:
            buckets = [
                (str(bound), totals.get((name, job_type, repr(bound)), 0.0))
                for bound in rollup.BUCKETS
            ]
            buckets.append(("+Inf", totals.get((name, job_type, "count"), 0.0)))
            histogram.add_metric(
                [job_type], buckets, sum_value=totals.get((name, job_type, "sum"), 0.0)
            )
        return histogram


def _busiest(family: GaugeMetricFamily, job_type: str, figure: Busiest) -> None:
    for partition, n in figure.named:
        family.add_metric([job_type, NO_PARTITION if partition is None else partition], n)
    family.add_metric([job_type, OTHER_PARTITIONS], figure.rest)


def http_registry() -> CollectorRegistry:
    """This server's HTTP figures: every gunicorn worker's (multiprocess mode) or this
    process's."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


def exposition(figures: JobFigures) -> bytes:
    """The whole text exposition."""
    jobs = CollectorRegistry()
    jobs.register(JobCollector(figures))
    return generate_latest(http_registry()) + generate_latest(jobs)
