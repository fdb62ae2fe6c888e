"""Bulk operations: cancel, retry or delete every job a filter selects, guarded by the count the
operator confirmed, each job through its named transition (the caller owns each transaction)."""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import reduce
from typing import Any

from sqlalchemy import ColumnElement, Connection

from app.queue.rules import edges
from app.queue.rules.visibility import visibility
from app.queue.sql import bulk as bulk_sql
from app.queue.sql import filters as filters_sql
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import NOTHING, Effects
from app.queue.vocabulary.errors import Conflict, InvalidInput
from app.queue.vocabulary.jobs import Job, JobFilters
from app.queue.vocabulary.states import (
    EDGES,
    TERMINAL,
    Edge,
    JobStatus,
    priority_label,
)
from app.queue.vocabulary.timeutil import iso

SAMPLE_SIZE = 10  # jobs shown with a preview


class Verb(StrEnum):
    """What a bulk operation does to each job it selects."""

    CANCEL = "cancel"
    RETRY = "retry"
    DELETE = "delete"


# The statuses each verb applies to: the named edges' sources, and "finished" for delete.
APPLIES_TO: dict[Verb, frozenset[JobStatus]] = {
    Verb.CANCEL: EDGES[Edge.CANCEL].sources,
    Verb.RETRY: EDGES[Edge.RETRY].sources,
    Verb.DELETE: frozenset(TERMINAL),
}


class StaleCount(Conflict):
    """The selected jobs changed since the preview."""

    def __init__(self, count: int, expected: int) -> None:
        super().__init__(
            f"the filter now selects {count} job(s), not {expected}: "
            "look at the new preview and confirm its count"
        )
        self.count = count


class BulkBusy(Conflict):
    """Another bulk operation is being applied."""


@dataclass(frozen=True)
class Selection:
    """Which jobs an operation takes: those matching the filters that ``verb`` applies to."""

    verb: Verb
    filters: JobFilters
    created_after: datetime | None = None
    created_before: datetime | None = None

    def conditions(self, actor: Actor) -> list[ColumnElement[bool]]:
        """The WHERE clause, within the jobs ``actor`` may see."""
        conditions = filters_sql.matching(self.filters, visibility(actor))
        return conditions + bulk_sql.selected(
            APPLIES_TO[self.verb], self.created_after, self.created_before
        )

    def described(self) -> dict[str, Any]:
        """The filter as the audit log records it (only what was given)."""
        priority = self.filters.priority
        given: dict[str, Any] = {
            "status": self.filters.status,
            "type": self.filters.type,
            "priority": None if priority is None else priority_label(priority),
            "q": self.filters.search,
            "payload": json.loads(self.filters.payload) if self.filters.payload else None,
            "created_after": iso(self.created_after),
            "created_before": iso(self.created_before),
        }
        return {name: value for name, value in given.items() if value is not None}


@dataclass(frozen=True)
class Preview:
    """How many jobs an operation would change, and the newest of them."""

    count: int
    sample: list[Job]


@dataclass
class JobSet:
    """The ids of the jobs an operation acts on, frozen when the count was checked (8 bytes a
    job, so even a large set stays small in memory)."""

    ids: array[int] = field(default_factory=lambda: array("q"))

    def __len__(self) -> int:
        return len(self.ids)

    def batches(self, size: int) -> Iterator[list[int]]:
        """The ids, ``size`` at a time, in the order they were read."""
        for start in range(0, len(self.ids), size):
            yield self.ids[start : start + size].tolist()


def _too_many(described: str, limit: int) -> InvalidInput:
    return InvalidInput(
        {
            "filter": f"selects {described} jobs; one bulk operation takes at most {limit} "
            "(BULK_MAX_JOBS): narrow the filter, e.g. with created_before"
        }
    )


def preview(conn: Connection, actor: Actor, selection: Selection, *, limit: int) -> Preview:
    """Count the jobs the operation would change and show the newest; changes nothing. More
    than ``limit`` jobs is refused (422), as applying them would be."""
    conditions = selection.conditions(actor)
    count = bulk_sql.count(conn, conditions)
    if count > limit:
        raise _too_many(str(count), limit)
    sample = bulk_sql.newest(conn, conditions, SAMPLE_SIZE) if count else []
    return Preview(count, sample)


def take(
    conn: Connection, actor: Actor, selection: Selection, *, expect_count: int, limit: int
) -> JobSet:
    """The set the operation will change, read in one statement so its size is the count
    checked against ``expect_count`` (StaleCount, 409, when they differ)."""
    found = JobSet(array("q", bulk_sql.ids(conn, selection.conditions(actor), limit + 1)))
    if len(found) > limit:
        raise _too_many(f"more than {limit}", limit)
    if len(found) != expect_count:
        raise StaleCount(len(found), expect_count)
    return found


def note(operation: int, reason: str) -> str:
    """What each changed job's event says: the operation (its audit event) and why."""
    return f"bulk operation {operation}: {reason}"


@dataclass(frozen=True)
class BatchResult:
    """What one batch did: how many jobs changed, and which were busy (another transaction
    was changing them at that instant, where writers run at once) and should be tried again."""

    changed: int
    busy: list[int]
    effects: Effects = NOTHING  # what the changed jobs mean to waiters


def apply_batch(
    conn: Connection,
    actor: Actor,
    selection: Selection,
    ids: list[int],
    *,
    operation: int,
    reason: str,
    now: datetime,
    wait: bool = False,
) -> BatchResult:
    """Apply the operation to those of ``ids`` that the selection still takes, each from the
    status it is in now: a job that left the selection meanwhile (finished, or no longer
    matching the filter) is skipped, never half-changed. ``wait``: for the locks of jobs
    another transaction holds, rather than skip them as busy."""
    taken, busy = bulk_sql.lock(conn, ids, selection.conditions(actor), wait=wait)
    if selection.verb is Verb.DELETE:
        return BatchResult(bulk_sql.delete_finished(conn, [job.id for job in taken]), busy)
    move = edges.cancel if selection.verb is Verb.CANCEL else edges.retry
    why = note(operation, reason)
    moved = [move(conn, job, now=now, actor=actor.name, note=why) for job in taken]
    changed = [m for m in moved if m.value is not None]
    effects = reduce(Effects.__or__, (m.effects for m in changed), NOTHING)
    return BatchResult(len(changed), busy, effects)
