"""The edges of the state graph (``states.EDGES``) as compare-and-sets that write their own
events, so no caller can forget either: ``claim``, ``finish_many`` for every report on running
jobs (complete, fail, time out; one statement per edge however many jobs), and one function for
each other edge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from app.queue.rules import workflows
from app.queue.sql import batches as batches_sql
from app.queue.sql import edges as edges_sql
from app.queue.sql.edges import Expected
from app.queue.sql.items import Columns, Kind
from app.queue.sql.jobs import append_events, event_row
from app.queue.vocabulary.effects import Changed, Effects
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import (
    EDGES,
    TERMINAL,
    Edge,
    EventKind,
    JobStatus,
)

# What a job gives up when it stops running: its holder's lease.
_NO_LEASE = {"worker_id": None, "claimed_at": None, "lease_expires_at": None, "deadline_at": None}
_FINISHED = {"secrets_sealed": None}  # finished for good: its secrets' values go, names stay


def _move(
    name: Edge,
    conn: Connection,
    job_id: int,
    *,
    expect: Expected,
    values: dict[str, Any],
    now: datetime,
    actor: str | None,
    pinned: JobStatus | None = None,
    **event: Any,
) -> Changed[Job | None]:
    """Apply edge ``name`` to one job (from ``pinned`` only, when the edge has several sources):
    the job as it left it (None: not in a state the edge leaves), and what that did."""
    edge = EDGES[name]
    sources = edge.sources if pinned is None else edge.sources & {pinned}
    if not sources:
        return Changed(None)
    job = edges_sql.move(
        conn,
        job_id,
        sources=sources,
        expect=expect,
        values={"status": edge.target, **values},
        at=now,
        kind=edge.kind,
        actor=actor,
        **event,
    )
    if job is None:
        return Changed(None)
    # its children and group learn of it (a retry reopens it)
    cascade = workflows.moved(conn, job, reopened=sources <= TERMINAL, now=now)
    return Changed(job, Effects.of([job], now) | cascade)


def _holder(worker: str, attempt: int | None) -> Expected:
    """The fencing expectation: held by ``worker`` (at ``attempt`` when the caller sent one)."""
    return {"worker_id": worker} if attempt is None else {"worker_id": worker, "attempts": attempt}


def _attempt_of(job: Job) -> Expected:
    """Expect the job exactly as read: same holder, attempt and retry count."""
    return {"worker_id": job.worker_id, "attempts": job.attempts, "retry_count": job.retry_count}


def claim(
    conn: Connection,
    *,
    worker: str,
    now: datetime,
    lease_seconds: int,
    limit: int = 1,
    types: tuple[str, ...] | None = None,
    type_leases: edges_sql.TypeLeases = (),
    except_types: tuple[str, ...] = (),
    run_limits: edges_sql.TypeLeases = (),
    fair: bool = False,
    picked: list[int] | None = None,
) -> list[Job]:
    """pending -> running: up to ``limit`` due jobs from the head of the queue (of ``types``
    when given, else of any type but ``except_types``), for ``worker``, in claim order (in the
    partitions' turns when ``fair``: partitioned jobs are claimable; of the ``picked`` jobs
    only, in their order, when given), each with its deadline when its type has a run limit;
    empty when nothing is due."""
    edge = EDGES[Edge.CLAIM]
    return edges_sql.claim_due(
        conn,
        sources=edge.sources,
        kind=edge.kind,
        worker=worker,
        now=now,
        lease_seconds=lease_seconds,
        limit=limit,
        types=types,
        type_leases=type_leases,
        except_types=except_types,
        run_limits=run_limits,
        fair=fair,
        picked=picked,
    )


@dataclass(frozen=True)
class Report:
    """A report on one running job, for ``finish_many``: the edge it takes (``complete``,
    ``fail_with_retry`` or ``fail_for_good`` from its worker; ``timed_out_with_retry`` or
    ``timed_out_for_good`` from the server) and that edge's values."""

    edge: Edge
    job_id: int
    attempt: int
    result: dict[str, object] | None = None
    error: str | None = None
    note: str | None = None
    retry_count: int = 0  # the retry count the job was read at (a failure spends one)
    run_at: datetime | None = None  # when a retried job is due again


_FAILURE: Columns = (
    ("expect_retry_count", Kind.INTEGER),
    ("error", Kind.TEXT),
    ("event_note", Kind.TEXT),
)
# Per edge of a report: the columns each job gets from its report.
_REPORTED: dict[Edge, Columns] = {
    Edge.COMPLETE: (("result", Kind.JSON),),
    Edge.FAIL_WITH_RETRY: (*_FAILURE, ("retry_count", Kind.INTEGER), ("run_at", Kind.TIMESTAMP)),
    Edge.FAIL_FOR_GOOD: _FAILURE,
}
_REPORTED[Edge.TIMED_OUT_WITH_RETRY] = _REPORTED[Edge.FAIL_WITH_RETRY]
_REPORTED[Edge.TIMED_OUT_FOR_GOOD] = _REPORTED[Edge.FAIL_FOR_GOOD]


def _shared(name: Edge, now: datetime) -> dict[str, Any]:
    """What edge ``name`` sets alike on every job it moves."""
    target = {"status": EDGES[name].target}
    if EDGES[name].target is JobStatus.PENDING:
        return {**target, **_NO_LEASE}
    done = {**target, "finished_at": now, **_FINISHED}
    if name is Edge.COMPLETE:
        return {**done, "progress": 100, "lease_expires_at": None, "deadline_at": None}
    return {**done, **_NO_LEASE}


def _item(report: Report) -> dict[str, Any]:
    return {
        "job_id": report.job_id,
        "attempt": report.attempt,
        "result": report.result,
        "error": report.error,
        "event_note": report.note,
        "expect_retry_count": report.retry_count,
        "retry_count": report.retry_count + 1,
        "run_at": report.run_at,
    }


def finish_many(
    conn: Connection, reports: Sequence[Report], *, worker: str | None, now: datetime
) -> Changed[dict[int, Job]]:
    """running -> completed, pending (a retry) or failed, per report, for the jobs ``worker``
    (None: whoever) holds at the report's attempt (and, for a failure, still at its retry
    count): one compare-and-set statement per edge, and one for the events of those that do not
    write their own (``move_many``), whatever the number of reports. The jobs that moved, by
    id; a job missing there did not move. Job ids must differ. A time-out's event names no
    actor: the server failed the attempt."""
    moved: dict[int, Job] = {}
    events = []
    for name, columns in _REPORTED.items():
        taken = [report for report in reports if report.edge == name]
        if not taken:
            continue
        edge = EDGES[name]
        jobs, recorded = batches_sql.move_many(
            conn,
            [_item(report) for report in taken],
            sources=edge.sources,
            worker=worker,
            shared=_shared(name, now),
            columns=columns,
            at=now,
            kind=edge.kind,
        )
        moved |= jobs
        if recorded:  # the move wrote its events
            continue
        events += [
            event_row(
                job=jobs[report.job_id],
                at=now,
                from_status=JobStatus.RUNNING,
                kind=edge.kind,
                actor=None if edge.kind is EventKind.TIMED_OUT else worker,
                error=report.error,
                note=report.note,
            )
            for report in taken
            if report.job_id in jobs
        ]
    append_events(conn, events)
    cascade = workflows.settle(conn, moved.values(), now=now)
    return Changed(moved, Effects.of(moved.values(), now) | cascade)


def _fail(
    name: Edge,
    conn: Connection,
    job: Job,
    *,
    values: dict[str, Any],
    now: datetime,
    error: str,
    actor: str | None,
    note: str | None,
    lease_ended_before: datetime | None = None,
) -> Changed[Job | None]:
    """A failed attempt gives up the lease and keeps the (sanitized) error."""
    return _move(
        name,
        conn,
        job.id,
        expect=_attempt_of(job),
        values={**_NO_LEASE, **values, "error": error},
        now=now,
        actor=actor,
        error=error,
        note=note,
        lease_ended_before=lease_ended_before,
    )


def lease_expired(
    conn: Connection, job: Job, *, now: datetime, run_at: datetime | None, error: str
) -> Changed[Job | None]:
    """running -> pending (``run_at`` given: a retry is left) or failed, for a lease that ended
    before ``now``; the event names the worker that went silent."""
    if run_at is not None:
        name, values = (
            Edge.LEASE_EXPIRED_WITH_RETRY,
            {"retry_count": job.retry_count + 1, "run_at": run_at},
        )
    else:
        name, values = Edge.LEASE_EXPIRED_FOR_GOOD, {"finished_at": now, **_FINISHED}
    return _fail(
        name,
        conn,
        job,
        values=values,
        now=now,
        error=error,
        actor=None,
        note=f"lease of {job.worker_id} expired",
        lease_ended_before=now,
    )


def release(
    conn: Connection, job_id: int, *, worker: str, attempt: int | None, now: datetime
) -> Changed[Job | None]:
    """running -> pending at once: the holder hands the job back unstarted (retry_count kept)."""
    return _move(
        Edge.RELEASE,
        conn,
        job_id,
        expect=_holder(worker, attempt),
        values={**_NO_LEASE, "run_at": now, "progress": None, "progress_message": None},
        now=now,
        actor=worker,
    )


def cancel(
    conn: Connection, job: Job, *, now: datetime, actor: str, note: str | None = None
) -> Changed[Job | None]:
    """pending or running -> cancelled, from the status ``job`` was read in (``note``: why,
    e.g. the bulk operation that did it)."""
    ended = {"lease_expires_at": None, "deadline_at": None, "waiting_for": None}
    values = {**ended, "finished_at": now, **_FINISHED}
    return _move(
        Edge.CANCEL,
        conn,
        job.id,
        expect={"attempts": job.attempts},
        values=values,
        now=now,
        actor=actor,
        pinned=JobStatus(job.status),
        note=note,
    )


def retry(
    conn: Connection,
    job: Job,
    *,
    now: datetime,
    actor: str,
    note: str | None = None,
    changes: Mapping[str, Any] | None = None,
) -> Changed[Job | None]:
    """failed or cancelled -> pending with a fresh retry budget (admins; ``note`` as for
    ``cancel``), with ``changes`` (columns: payload, priority, max_retries) replaced in the
    same statement, then an ``edited`` event (pending to pending: the event of a finish is
    one that arrives in completed or failed) naming them, never their values. The same
    statement moves the job's status and priority, so the counters move it from its old
    status and priority to its new ones (migration 0026)."""
    values = {
        **_NO_LEASE,
        "retry_count": 0,
        "run_at": now,
        "progress": None,
        "progress_message": None,
        "finished_at": None,
        **(changes or {}),
    }
    done = _move(
        Edge.RETRY,
        conn,
        job.id,
        expect={"attempts": job.attempts},
        values=values,
        now=now,
        actor=actor,
        pinned=JobStatus(job.status),
        note=note,
    )
    if changes and done.value is not None:
        edited = event_row(
            job=done.value,
            at=now,
            from_status=JobStatus.PENDING,
            kind=EventKind.EDITED,
            actor=actor,
            note="changed " + ", ".join(changes),
        )
        append_events(conn, [edited])
    return done


def run_now(conn: Connection, job: Job, *, now: datetime, actor: str) -> Changed[Job | None]:
    """pending -> pending, due at ``now``: a job waiting for its run_at or a backoff, as read
    (the same run_at; a claim or another change since moves nothing)."""
    return _move(
        Edge.RUN_NOW,
        conn,
        job.id,
        expect={"run_at": job.run_at, "attempts": job.attempts},
        values={**_NO_LEASE, "run_at": now},  # a pending job holds no lease: said again
        now=now,
        actor=actor,
    )
