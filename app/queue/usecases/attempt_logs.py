"""Attempt logs: the holder of a job's attempt appends lines, sanitized like errors and capped
per attempt (the oldest lines dropped, and counted, past the cap); admins read them per attempt.
The rows go with their job (a key with ON DELETE CASCADE), whichever path deletes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson
from sqlalchemy import Connection

from app.queue.rules.policy import Action, holds, require, role_allows
from app.queue.rules.sanitize import sanitize_lines
from app.queue.rules.visibility import visibility
from app.queue.sql import batches as batches_sql
from app.queue.sql import logs as logs_sql
from app.queue.usecases.finishing import refusal
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import NotFound, QueueError
from app.queue.vocabulary.jobs import Beat, Job, Outcome

MAX_LINES = 100  # lines per request (per item of a finish or heartbeat)
MAX_LINE_BYTES = 2048  # UTF-8 bytes per line
MAX_ATTEMPT_BYTES = 256 * 1024  # UTF-8 bytes an attempt keeps; older lines are dropped past it


@dataclass(frozen=True)
class Appended:
    """What an append did: the lines it stored, and how many older lines of the attempt it
    dropped to stay within ``MAX_ATTEMPT_BYTES``."""

    accepted: int
    dropped: int


@dataclass(frozen=True)
class LogLine:
    """One line as stored: when the server received it, and its sanitized text."""

    at: datetime
    text: str


@dataclass(frozen=True)
class AttemptLog:
    """The lines one attempt kept, oldest first (a marker line first when some were dropped)."""

    attempt: int
    lines: list[LogLine]


def dropped_marker(count: int) -> str:
    """The line that stands for the ``count`` oldest lines the cap dropped."""
    return f"[{count} earlier lines dropped: an attempt keeps {MAX_ATTEMPT_BYTES // 1024} KiB]"


def append(
    conn: Connection,
    actor: Actor,
    job_id: int,
    *,
    attempt: int,
    lines: Sequence[str],
    now: datetime,
) -> Appended:
    """Append ``lines`` to the attempt ``actor`` holds, each sanitized as errors are. Refused
    as a heartbeat is (404, 409) when the caller does not hold that attempt."""
    job, _ = batches_sql.jobs_by_ids(conn, {job_id}, None).get(job_id, (None, False))
    if job is None or not holds(actor, job, attempt):
        found = batches_sql.jobs_by_ids(conn, {job_id}, visibility(actor))
        raise refusal(actor, job_id, attempt, found)
    (appended,) = _store(conn, [(job_id, attempt, lines)], now)
    return appended


def carry(
    conn: Connection,
    reports: Sequence[tuple[Outcome | Beat, Job | QueueError]],
    *,
    now: datetime,
) -> None:
    """Store the lines carried by each report that landed (its answer is the job, not a
    refusal) in the attempt it named: one read of the attempts' sizes and one insert for all
    of them, nothing when no report carries lines."""
    entries = [
        (job.id, job.attempts if item.attempt is None else item.attempt, item.logs)
        for item, job in reports
        if item.logs and isinstance(job, Job)
    ]
    if entries:
        _store(conn, entries, now)


def _store(
    conn: Connection, entries: Sequence[tuple[int, int, Sequence[str]]], now: datetime
) -> list[Appended]:
    """Append each entry's lines (``(job id, attempt, lines)``, the caller holding each),
    sanitized, within each attempt's cap: a row per entry, inserted at once."""
    kept = logs_sql.attempt_sizes(conn, {(job_id, attempt) for job_id, attempt, _ in entries})
    rows: list[logs_sql.NewRow] = []
    appended: list[Appended] = []
    for job_id, attempt, lines in entries:
        clean = sanitize_lines(lines, MAX_LINE_BYTES)
        size = sum(len(line.encode()) for line in clean)
        before = kept.get((job_id, attempt), 0)
        dropped = carried = 0
        if before + size > MAX_ATTEMPT_BYTES:
            logs_sql.append(conn, rows)  # the cut reads the attempt's rows: these first
            rows.clear()
            excess = before + size - MAX_ATTEMPT_BYTES
            dropped, carried = _make_room(conn, job_id, attempt, excess)
            before = logs_sql.attempt_sizes(conn, {(job_id, attempt)}).get((job_id, attempt), 0)
        kept[(job_id, attempt)] = before + size
        text = orjson.dumps(clean).decode()
        rows.append(logs_sql.NewRow(job_id, attempt, now, text, size, carried))
        appended.append(Appended(len(clean), dropped))
    logs_sql.append(conn, rows)
    return appended


def _make_room(conn: Connection, job_id: int, attempt: int, excess: int) -> tuple[int, int]:
    """Drop the attempt's oldest lines until ``excess`` bytes are free: how many were dropped,
    and the count the new row must carry (every line dropped so far, when no older row is
    left to carry it). A row the cut goes through keeps its newer lines."""
    rows = logs_sql.rows(conn, job_id, attempt)
    total = sum(row.dropped for row in rows)  # dropped by earlier appends
    freed = dropped = 0
    gone: list[int] = []
    for row in rows:
        lines: list[str] = orjson.loads(row.lines)
        while lines and freed < excess:
            freed += len(lines.pop(0).encode())
            dropped += 1
        if lines:
            logs_sql.drop(conn, gone)
            rest = orjson.dumps(lines).decode()
            size = sum(len(line.encode()) for line in lines)
            logs_sql.rewrite(conn, row.id, lines=rest, size=size, dropped=total + dropped)
            return dropped, 0
        gone.append(row.id)
    logs_sql.drop(conn, gone)
    return dropped, total + dropped


def read(conn: Connection, actor: Actor, job_id: int) -> list[AttemptLog]:
    """A job's logs per attempt, oldest first: only for roles that read logs (403 for any
    other, whatever the job), 404 when the job does not exist."""
    require(actor, Action.READ_LOGS)
    if not batches_sql.jobs_by_ids(conn, {job_id}, None):
        raise NotFound(f"job {job_id} does not exist")
    return _attempts(conn, job_id)


def shown(conn: Connection, actor: Actor, job_id: int) -> list[AttemptLog] | None:
    """For the job page, a job ``actor`` sees: its logs, or None when ``actor`` may not read
    logs."""
    return _attempts(conn, job_id) if role_allows(actor, Action.READ_LOGS) else None


def _attempts(conn: Connection, job_id: int) -> list[AttemptLog]:
    attempts: dict[int, list[LogLine]] = {}
    for row in logs_sql.rows(conn, job_id):
        lines = attempts.setdefault(row.attempt, [])
        if row.dropped:
            lines.append(LogLine(row.at, dropped_marker(row.dropped)))
        lines.extend(LogLine(row.at, text) for text in orjson.loads(row.lines))
    return [AttemptLog(attempt, lines) for attempt, lines in attempts.items()]
