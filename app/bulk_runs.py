"""Bulk operations for the API and the pages, in short transactions: the set and its count, the
audit row that names the operation, then BULK_BATCH_SIZE jobs at a time so claims keep flowing."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app

from app import db
from app.audit import hooks as audit
from app.audit.actions import AuditAction
from app.queue import bulk
from app.queue.models import Actor
from app.timeutil import utcnow


@dataclass(frozen=True)
class Applied:
    """What an operation did: its id and how many jobs it changed."""

    operation: int
    affected: int


def _limit() -> int:
    return int(current_app.config["BULK_MAX_JOBS"])


def preview(actor: Actor, selection: bulk.Selection) -> bulk.Preview:
    """The count and the newest jobs of the selection; changes nothing."""
    with db.read() as conn:
        return bulk.preview(conn, actor, selection, limit=_limit())


def apply(actor: Actor, selection: bulk.Selection, *, reason: str, expect_count: int) -> Applied:
    """Run the operation on the set as it is now, if it holds ``expect_count`` jobs (else
    StaleCount, and nothing is written, not even the audit row)."""
    with db.read() as conn:  # one snapshot: the set and its count are the same thing
        job_set = bulk.take(conn, actor, selection, expect_count=expect_count, limit=_limit())
    with db.transaction() as conn:
        operation = audit.record(
            conn,
            AuditAction.JOB_BULK,
            f"jobs:{selection.verb}",
            actor=actor.name,
            filter=selection.described(),
            reason=reason,
            count=len(job_set),
        )
    affected = 0
    for batch in job_set.batches(int(current_app.config["BULK_BATCH_SIZE"])):
        with db.transaction() as conn:
            affected += bulk.apply_batch(
                conn,
                actor,
                selection.verb,
                batch,
                operation=operation,
                reason=reason,
                now=utcnow(),
            )
    return Applied(operation, affected)
