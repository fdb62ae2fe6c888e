"""Bulk operations for the API and the pages, in short transactions: the set and its count, the
audit row that names the operation, then BULK_BATCH_SIZE jobs at a time so claims keep flowing.

One apply at a time, across processes and servers: an apply holds the "bulk" lock (a row of
``locks``) from its count check to its last batch, so of two admins confirming the same count
at once, the second counts what the first left and is told the count changed (409)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from flask import current_app

from app.audit import store as audit_store
from app.audit.actions import AuditAction, Origin
from app.infra import db
from app.queue.sql import locks as locks_sql
from app.queue.usecases import bulk
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce

# Where writers run at once, a batch skips jobs another transaction holds at that instant; they
# are tried again after a pause (a worker's transaction lasts milliseconds), this many times,
# and a job still busy then (one a worker keeps claiming at the head of the queue) waits for its
# lock, alone in its own transaction: one that holds no other lock cannot be part of a deadlock.
BUSY_PASSES = 2
BUSY_PAUSE_SECONDS = 0.05
LOCK = "bulk"
# An apply renews its lock with every batch; a process that died holding it frees it after this.
LOCK_SECONDS = 300
# How long an apply waits for another to finish before answering 409, and how often it looks.
LOCK_WAIT_SECONDS = 30.0
LOCK_POLL_SECONDS = 0.05


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


@contextmanager
def _bulk_lock() -> Iterator[str]:
    """Hold the bulk lock (waiting for the apply that holds it, at most LOCK_WAIT_SECONDS,
    holding no transaction meanwhile); yields the holder's name, for renewals."""
    holder = uuid.uuid4().hex
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        now = utcnow()
        with db.transaction() as conn:
            until = now + timedelta(seconds=LOCK_SECONDS)
            if locks_sql.take(conn, LOCK, holder, now=now, until=until):
                break
        if time.monotonic() >= deadline:
            raise bulk.BulkBusy(
                "another bulk operation is being applied: try again once it is done"
            )
        time.sleep(LOCK_POLL_SECONDS)
    try:
        yield holder
    finally:
        with db.transaction() as conn:
            locks_sql.drop(conn, LOCK, holder)


def apply(
    actor: Actor, selection: bulk.Selection, *, reason: str, expect_count: int, origin: Origin
) -> Applied:
    """Run the operation on the set as it is now, if it holds ``expect_count`` jobs (else
    StaleCount, and nothing is written, not even the audit row, which names ``origin``),
    holding the bulk lock."""
    with _bulk_lock() as holder:
        return _apply(
            actor, selection, reason=reason, expect_count=expect_count, holder=holder, origin=origin
        )


def _apply(
    actor: Actor,
    selection: bulk.Selection,
    *,
    reason: str,
    expect_count: int,
    holder: str,
    origin: Origin,
) -> Applied:
    with db.read() as conn:  # one snapshot: the set and its count are the same thing
        job_set = bulk.take(conn, actor, selection, expect_count=expect_count, limit=_limit())
    with db.transaction() as conn:
        operation = audit_store.record(
            conn,
            origin,
            AuditAction.JOB_BULK,
            f"jobs:{selection.verb}",
            at=utcnow(),
            filter=selection.described(),
            reason=reason,
            count=len(job_set),
        )
    size = int(current_app.config["BULK_BATCH_SIZE"])
    affected = 0
    batches: Iterable[list[int]] = job_set.batches(size)  # lazily: a set may be large
    busy: list[int] = []
    for passes in range(1 + BUSY_PASSES):
        if passes:  # jobs a worker was changing at that instant: again once it is done
            time.sleep(BUSY_PAUSE_SECONDS)
        busy = []
        for batch in batches:
            done = _apply_batch(actor, selection, batch, operation, reason, holder)
            affected, busy = affected + done.changed, busy + done.busy
        if not busy:
            break
        batches = [busy[start : start + size] for start in range(0, len(busy), size)]
    for job_id in busy:
        done = _apply_batch(actor, selection, [job_id], operation, reason, holder, wait=True)
        affected += done.changed
    return Applied(operation, affected)


def _apply_batch(
    actor: Actor,
    selection: bulk.Selection,
    ids: list[int],
    operation: int,
    reason: str,
    holder: str,
    *,
    wait: bool = False,
) -> bulk.BatchResult:
    """One batch in its own transaction, which also renews the bulk lock."""
    with db.transaction() as conn:
        locks_sql.renew(conn, LOCK, holder, until=utcnow() + timedelta(seconds=LOCK_SECONDS))
        done = bulk.apply_batch(
            conn, actor, selection, ids, operation=operation, reason=reason, now=utcnow(), wait=wait
        )
        announce(done.effects)
    return done
