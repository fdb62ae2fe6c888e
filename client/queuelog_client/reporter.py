"""The worker's held jobs and its reporter thread: batched heartbeats for every held job, the
lines handlers log (carried by each job's heartbeat item every round, and by its outcome), and
the outcomes kept until the server acknowledges them or says the job is no longer ours. An
outcome rides on the worker's next claim; the reporter sends only those left behind (while the
claim waits for jobs, say), so that none waits for a long-poll to end."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from queuelog_client.client import Client
from queuelog_client.errors import QueuelogError
from queuelog_client.handlers import MAX_LOG_BATCH, JobContext
from queuelog_client.models import Job
from queuelog_client.transport import backoff

log = logging.getLogger("queuelog_client.worker")

TICK = 0.5  # how often the reporter looks for due heartbeats and progress
# How long a ready outcome waits for a ride on the worker's next claim before the reporter sends
# it alone: longer than the worker's own linger (``CLAIM_LINGER``), so that it usually rides,
# short enough that an outcome never waits for a long-poll to end.
OUTCOME_WAIT = 0.05
MAX_HEARTBEAT_INTERVAL = 10.0  # heartbeat at least this often, whatever the lease
DEFAULT_LEASE = 300.0  # assumed when a claimed job does not say when its lease ends
MAX_BATCH = 1000  # items per request, the server's default MAX_BATCH
GONE = frozenset({404, 409})  # "this job is no longer yours": stop sending anything for it


@dataclass
class Held:
    """A job this worker claimed and has not yet been acknowledged for."""

    job: Job
    ctx: JobContext
    interval: float
    next_beat: float
    claimed: float = field(default_factory=time.monotonic)
    outcome: dict[str, Any] | None = None
    due: float = 0.0  # when the reporter sends the outcome if no claim has taken it
    sending: bool = False  # a request carries the outcome now
    alone: bool = False  # in a request the server refused: sent on its own, by the reporter
    beating: bool = True

    def waiting(self) -> bool:
        """Whether its outcome is ready and no request carries it."""
        return self.outcome is not None and not self.sending


@dataclass
class Stats:
    """What became of the jobs this worker claimed."""

    completed: int = 0
    retried: int = 0
    failed: int = 0
    released: int = 0
    dropped: int = 0

    def summary(self) -> str:
        """One line for the log when the worker stops."""
        return (
            f"{self.completed} completed, {self.retried} failed and retried later, "
            f"{self.failed} failed for good, {self.released} released unstarted, "
            f"{self.dropped} no longer ours"
        )


def heartbeat_interval(job: Job) -> float:
    """A third of the job's lease, at most ``MAX_HEARTBEAT_INTERVAL`` seconds."""
    lease = DEFAULT_LEASE
    if job.lease_expires_at is not None and job.claimed_at is not None:
        lease = (job.lease_expires_at - job.claimed_at).total_seconds()
    return max(min(lease / 3, MAX_HEARTBEAT_INTERVAL), TICK)


class Reporter:
    """Owns the held jobs and their outcomes; the worker's claims take the ready outcomes
    (``take_outcomes``), and its own thread sends those left behind for ``OUTCOME_WAIT``, then
    the due heartbeats, at least every ``TICK``, backing off (exponential, full jitter) while the
    server cannot be reached."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.stats = Stats()
        self._held: dict[int, Held] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # an outcome is ready, or stopping
        self._stop = threading.Event()
        self._failures = 0
        self._thread = threading.Thread(target=self._loop, name="queuelog-reporter", daemon=True)

    def start(self) -> None:
        """Start sending."""
        self._thread.start()

    def hold(self, job: Job) -> Held:
        """Start heartbeating a newly claimed job."""
        interval = heartbeat_interval(job)
        spawner = partial(self.client.spawn, job.id, job.attempt)
        held = Held(job, JobContext(job, spawner), interval, time.monotonic() + interval)
        with self._lock:
            self._held[job.id] = held
        return held

    def finished(self, held: Held, outcome: dict[str, Any]) -> None:
        """Keep a handler's outcome, with the lines its handler logged and are not yet sent,
        for the next claim, or the reporter's finish."""
        self._attach_logs(held, outcome)
        with self._lock:
            held.outcome, held.due = outcome, time.monotonic() + OUTCOME_WAIT
            self._changed.notify_all()

    def has_outcomes(self) -> bool:
        """Whether an outcome waits for a ride on the next claim."""
        with self._lock:
            return any(held.waiting() and not held.alone for held in self._held.values())

    def take_outcomes(self) -> list[Held]:
        """The outcomes for the next claim to carry (``answered`` or ``give_back`` them)."""
        return self._take(lambda held: not held.alone)

    def answered(self, carried: list[Held], answers: list[dict[str, Any]]) -> None:
        """Settle the outcomes a request carried with the server's answers, in order."""
        for held, answer in zip(carried, answers, strict=True):
            self._answered_outcome(held, answer)

    def give_back(self, carried: list[Held], *, alone: bool = False) -> None:
        """Outcomes whose request failed: the reporter sends them now (only it does, if
        ``alone``: the server refused the request they were in)."""
        now = time.monotonic()
        with self._lock:
            for held in carried:
                held.sending, held.due, held.alone = False, now, held.alone or alone
            self._changed.notify_all()

    def released(self, held: Held, *, ok: bool) -> None:
        """Stop tracking a job given back to the server (``ok``) or left to its lease."""
        with self._lock:
            self._held.pop(held.job.id, None)
            self.stats.released += ok

    def outstanding(self) -> int:
        """Outcomes not yet acknowledged."""
        with self._lock:
            return sum(1 for held in self._held.values() if held.outcome is not None)

    def close(self, deadline: float) -> int:
        """Keep sending until every outcome is acknowledged or ``deadline`` (monotonic) passes,
        then stop; returns how many outcomes stay unacknowledged."""
        while self.outstanding() and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.05)
        with self._lock:
            self._stop.set()
            self._changed.notify_all()
        self._thread.join(timeout=5)
        return self.outstanding()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if not self._stop.is_set():
                    self._changed.wait(self._pause())
            if self._stop.is_set():
                return
            try:
                self._send_outcomes()
                self._send_heartbeats()
            except Exception as exc:  # this thread must outlive any answer: outcomes wait on it
                self._failures += 1
                delay = TICK + backoff(self._failures, base=TICK, cap=10.0)
                log.warning("cannot report to the server (retrying in %.1f s): %s", delay, exc)
                self._stop.wait(delay)
                continue
            self._failures = 0

    def _pause(self) -> float:
        """Until the first outcome left behind is due (0: now), at most ``TICK``; under the
        lock, so that an outcome readied during the last round is not missed."""
        now = time.monotonic()
        dues = [held.due - now for held in self._held.values() if held.waiting()]
        return max(0.0, min([TICK, *dues]))

    def _take(self, wanted: Callable[[Held], bool], limit: int = MAX_BATCH) -> list[Held]:
        """Mark up to ``limit`` waiting outcomes that are ``wanted`` as carried; return them."""
        with self._lock:
            waiting = [held for held in self._held.values() if held.waiting() and wanted(held)]
            for held in waiting[:limit]:
                held.sending = True
        return waiting[:limit]

    def _send_outcomes(self) -> None:
        """Send the outcomes left behind, together; once the server refused a request that
        carried them, one at a time, and one refused on its own is refused for good (as when
        the server refuses an item), so that no outcome holds up the others or the heartbeats."""
        now = time.monotonic()
        sent = self._take(lambda held: held.alone, 1) or self._take(lambda held: held.due <= now)
        if not sent:
            return
        try:
            answers = self.client.finish([held.outcome or {} for held in sent], retries=0)
        except Exception as exc:
            if not (isinstance(exc, QueuelogError) and _refused(exc.status)):
                self.give_back(sent)
                raise
            if len(sent) > 1:
                self.give_back(sent, alone=True)
                return
            if (sent[0].outcome or {}).pop("logs", None) is not None:
                # Refused alone while it carried lines: the outcome matters more than them.
                log.warning("job %s: its last log lines were refused: %s", sent[0].job.id, exc)
                self.give_back(sent)
                return
            answers = [{"status": exc.status, "detail": str(exc)}]
        self.answered(sent, answers)

    def _answered_outcome(self, held: Held, answer: dict[str, Any]) -> None:
        status = answer.get("status")
        outcome = held.outcome or {}
        if status != 200 and not _refused(status):
            self._keep(held, outcome, time.monotonic() + TICK)  # not done: sent again next round
            return
        if status not in GONE and status != 200 and outcome.get("outcome") == "completed":
            # The result was refused (too large or too deep, say): fail the attempt instead.
            detail = answer.get("detail") or "refused"
            failed = {**_identity(held), "outcome": "failed", "error": f"result {detail}"}
            self._keep(held, failed, time.monotonic())
            return
        with self._lock:
            self._held.pop(held.job.id, None)
        self._log_outcome(held, outcome, status, answer)

    def _keep(self, held: Held, outcome: dict[str, Any], due: float) -> None:
        with self._lock:
            held.outcome, held.due, held.sending = outcome, due, False
            self._changed.notify_all()

    def _log_outcome(
        self, held: Held, outcome: dict[str, Any], status: Any, answer: dict[str, Any]
    ) -> None:
        job = held.job
        name = f"job {job.id} {job.type} attempt {job.attempt}"
        seconds = time.monotonic() - held.claimed
        if status != 200:
            self.stats.dropped += 1
            log.warning("%s: outcome refused (%s): %s", name, status, answer.get("detail"))
        elif outcome["outcome"] == "completed":
            self.stats.completed += 1
            log.info("%s: completed in %.2f s", name, seconds)
        elif (answer.get("job") or {}).get("status") == "pending":
            self.stats.retried += 1
            log.info("%s: failed, will retry (%.2f s): %s", name, seconds, outcome["error"])
        else:
            self.stats.failed += 1
            log.info("%s: failed (%.2f s): %s", name, seconds, outcome["error"])

    def _send_heartbeats(self) -> None:
        """The due heartbeats, and a beat for each running job whose handler logged lines
        (up to 100 a job a round, carried in its item; the rest go in the next rounds)."""
        now = time.monotonic()
        items: list[dict[str, Any]] = []
        batch: list[_Beat] = []
        with self._lock:
            for held in self._held.values():
                if not held.beating:
                    continue
                running = held.outcome is None
                progress = held.ctx.take_progress() if running else None
                lines = self._lines_to_carry(held) if running else None
                if progress is None and lines is None and now < held.next_beat:
                    continue
                item = _identity(held)
                if progress is not None:
                    item["progress"], message = progress
                    if message is not None:
                        item["message"] = message
                if lines is not None:
                    item["logs"] = lines
                items.append(item)
                batch.append(_Beat(held, progress, lines))
                if len(items) == MAX_BATCH:
                    break
        if not items:
            return
        try:
            answers = self.client.heartbeat(items, retries=0)
        except Exception:
            for beat in batch:
                if beat.progress is not None:
                    beat.held.ctx.restore_progress(beat.progress)
                if beat.lines is not None:
                    beat.held.ctx.restore_logs(beat.lines)
            raise
        finally:
            for beat in batch:
                if beat.lines is not None:
                    beat.held.ctx.sending_logs.release()
        for beat, answer in zip(batch, answers, strict=True):
            self._answered_heartbeat(beat.held, answer, now)

    @staticmethod
    def _lines_to_carry(held: Held) -> list[str] | None:
        """The oldest unsent lines of ``held`` for its heartbeat item, with ``sending_logs``
        held until the request is answered (None, lock not held: none, or another thread
        sends them)."""
        if not held.ctx.unsent_logs() or not held.ctx.sending_logs.acquire(blocking=False):
            return None
        lines = held.ctx.take_logs()
        if not lines:
            held.ctx.sending_logs.release()
            return None
        return lines

    def _answered_heartbeat(self, held: Held, answer: dict[str, Any], now: float) -> None:
        status = answer.get("status")
        if status == 200:
            held.next_beat = now + held.interval
        elif status in GONE:
            held.beating = False
            held.ctx.cancelled = True  # cancelled, or re-claimed by someone else: stop early
            log.warning(
                "job %s: the server refused its heartbeat (%s): %s",
                held.job.id,
                status,
                answer.get("detail"),
            )

    def _attach_logs(self, held: Held, outcome: dict[str, Any]) -> None:
        """Put ``held``'s last unsent lines (up to 100) on its outcome item; the older ones,
        if more are left, go first in requests of their own (the server takes no lines for a
        finished attempt). On the handler's thread, once the handler returned: waits for a
        heartbeat carrying earlier lines to be answered, so that the lines stay in order; lines
        the server cannot take now are dropped rather than hold the outcome."""
        with held.ctx.sending_logs:
            try:
                self._send_logs_of(held, retries=2)
            except Exception as exc:
                log.warning("job %s: its log lines could not be sent: %s", held.job.id, exc)
            if lines := held.ctx.take_logs():
                outcome["logs"] = lines

    def _send_logs_of(self, held: Held, *, retries: int) -> None:
        """Send ``held``'s unsent lines in order, all but the last 100 (with ``sending_logs``
        held). A job no longer ours drops them; any other failure puts them back and raises."""
        while held.ctx.unsent_logs() > MAX_LOG_BATCH:
            lines = held.ctx.take_logs()
            try:
                self.client.append_logs(held.job.id, held.job.attempt, lines, retries=retries)
            except QueuelogError as exc:
                if exc.status in GONE:  # no longer ours: the server takes none of them
                    while held.ctx.take_logs():
                        pass
                    return
                if exc.status != 422:  # refused as they are: sent again, they would be again
                    held.ctx.restore_logs(lines)
                    raise
            except Exception:
                held.ctx.restore_logs(lines)
                raise


@dataclass(frozen=True)
class _Beat:
    """A heartbeat item in flight: its job, and the progress and lines it carries."""

    held: Held
    progress: tuple[int, str | None] | None
    lines: list[str] | None


def _refused(status: Any) -> bool:
    """Whether the server refused what was sent (a 4xx other than 429): sent again as it is, it
    would be refused again."""
    return isinstance(status, int) and 400 <= status < 500 and status != 429


def _identity(held: Held) -> dict[str, Any]:
    return {"id": held.job.id, "attempt": held.job.attempt}
