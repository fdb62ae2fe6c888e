"""Housekeeping: due schedules fire, attempts past their deadlines time out, and retention prunes
old finished jobs and audit rows. Each server process runs it in the background
(``app.infra.housekeeper``: schedules and time-outs at most once per SCHEDULE_TICK_SECONDS,
one retention batch at most once per RETENTION_TICK_SECONDS), never inside a request; ``flask
jobs tick`` runs all of it. Each batch is its own short transaction; between retention batches
the write lock is left free at least as long as a batch held it, so claims never queue behind
a long prune."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.audit import store as audit_store
from app.queue.rules import retention
from app.queue.rules.settings import QueueSettings
from app.queue.sql import schedules as schedules_sql
from app.queue.usecases import finishing, schedules
from app.storage.transactions import Transactions, announce


@dataclass
class Housekeeping:
    """The housekeeping of one database, for one process (which remembers the size its last
    prune batch settled on)."""

    transactions: Transactions
    settings: QueueSettings
    grace: timedelta  # SCHEDULE_GRACE_SECONDS: an older slot was missed
    _prune_size: int = field(default=0, init=False)

    def fire_due(self, now: datetime) -> list[schedules.Fired]:
        """Fire every schedule due at ``now``, a batch per transaction, until none is left or a
        batch claims nothing (the rest belongs to tickers in other processes)."""
        fired: list[schedules.Fired] = []
        while True:
            # A read first: where writers take turns, the write lock is taken only when
            # something is due.
            with self.transactions.read() as conn:
                if not schedules_sql.any_due(conn, now):
                    return fired
            with self.transactions.write() as conn:
                batch = schedules.tick(conn, now=now, settings=self.settings, grace=self.grace)
                announce(batch.effects)
            if not batch.value:
                return fired
            fired += batch.value

    def time_out_overdue(self, now: datetime, *, batches: int | None = None) -> int:
        """Fail the running attempts past their deadlines (max_run_seconds), a batch of
        RECOVER_BATCH per transaction, up to ``batches`` of them (None: all); how many moved."""
        with self.transactions.read() as conn:  # a read first: no write lock when none is late
            if not finishing.any_overdue(conn, now):
                return 0
        total, done, limit = 0, 0, self.settings.recover_batch
        while batches is None or done < batches:
            with self.transactions.write() as conn:
                moved = finishing.sweep_overdue(conn, now=now, settings=self.settings, limit=limit)
                announce(moved.effects)
            total, done = total + moved.value, done + 1
            if moved.value < limit:
                break
        return total

    def prune(self, now: datetime, *, batches: int | None = None) -> retention.Pruned:
        """Delete what retention says is old, batch by batch (up to ``batches`` of them, None:
        until nothing is left), each its own transaction of at most PRUNE_BATCH_SIZE jobs and
        audit rows, sized so that its deletes hold the write lock about
        ``retention.BATCH_SECONDS`` beyond the commit any write pays, and with a pause as long
        as the batch after it. Records what went (the retention page)."""
        rules, largest = self.settings.retention, self.settings.prune_batch
        audit_cutoff = rules.audit_cutoff(now)
        total, done, took = retention.Pruned(), 0, 0.0
        while batches is None or done < batches:
            time.sleep(took)
            size = self._prune_size or min(retention.MIN_BATCH, largest)
            with self.transactions.write() as conn:
                began = time.monotonic()  # the write lock is held from here to the commit's end
                step = retention.prune_jobs(conn, rules.job_cutoffs(now), size)
                if audit_cutoff is not None:
                    audited = audit_store.prune(conn, before=audit_cutoff, batch=size)
                    step += retention.Pruned(audit_events=audited)
                total += step
                if not total.nothing:
                    retention.record(conn, total, at=now)
                worked = time.monotonic() - began
            took, done = time.monotonic() - began, done + 1
            # Sized by the deleting alone: the commit costs any write transaction the same.
            self._prune_size = retention.next_batch(size, worked, largest=largest)
            if step.job_total < size and step.audit_events < size:
                break
        return total

    def anything_old(self, now: datetime) -> bool:
        """Whether retention has anything to delete (a read: no write lock when nothing is old)."""
        rules = self.settings.retention
        audit_cutoff = rules.audit_cutoff(now)
        with self.transactions.read() as conn:
            return retention.anything_old(conn, rules, now) or (
                audit_cutoff is not None and audit_store.any_before(conn, audit_cutoff)
            )

    def tick(self, now: datetime, *, with_retention: bool) -> None:
        """A background tick: schedules and one batch of time-outs; with ``with_retention``,
        one retention batch when something is old."""
        self.fire_due(now)
        self.time_out_overdue(now, batches=1)
        if with_retention and self.anything_old(now):
            self.prune(now, batches=1)
