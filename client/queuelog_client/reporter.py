"""The worker's reporter thread: batched heartbeats for every held job, and batched outcomes
kept and re-sent until the server acknowledges them or says the job is no longer ours."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from queuelog_client.client import Client
from queuelog_client.handlers import JobContext
from queuelog_client.models import Job
from queuelog_client.transport import backoff

log = logging.getLogger("queuelog_client.worker")

TICK = 0.5  # how often the reporter looks for due heartbeats and progress
# How long a ready outcome may wait for those of other held jobs, so that handlers returning
# one after the other are reported in one request.
OUTCOME_LINGER = 0.01
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
    beating: bool = True


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
    """Owns the held jobs; its thread sends outcomes first, then heartbeats, every ``TICK`` and
    as soon as an outcome is ready (outcomes finished while a request is under way go together
    in the next one), backing off (exponential, full jitter) while the server cannot be reached."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.stats = Stats()
        self._held: dict[int, Held] = {}
        self._lock = threading.Lock()
        self._outcome = threading.Condition(self._lock)  # notified with each new outcome
        self._stop = threading.Event()
        self._ready = threading.Event()  # an outcome waits to be sent
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
        """Queue a handler's outcome for the next batch."""
        with self._lock:
            held.outcome = outcome
            self._outcome.notify_all()
        self._ready.set()

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
        self._stop.set()
        self._ready.set()
        self._thread.join(timeout=5)
        return self.outstanding()

    def _loop(self) -> None:
        while not self._stop.is_set():
            outcome_ready = self._ready.wait(TICK)
            if self._stop.is_set():
                return
            if outcome_ready:
                self._linger()
            self._ready.clear()
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

    def _linger(self) -> None:
        """Give held jobs still without an outcome ``OUTCOME_LINGER`` to add theirs."""
        with self._outcome:
            self._outcome.wait_for(
                lambda: all(held.outcome is not None for held in self._held.values()),
                timeout=OUTCOME_LINGER,
            )

    def _send_outcomes(self) -> None:
        with self._lock:
            ready = [held for held in self._held.values() if held.outcome is not None]
        for start in range(0, len(ready), MAX_BATCH):
            batch = ready[start : start + MAX_BATCH]
            answers = self.client.finish([held.outcome or {} for held in batch], retries=0)
            for held, answer in zip(batch, answers, strict=True):
                self._answered_outcome(held, answer)

    def _answered_outcome(self, held: Held, answer: dict[str, Any]) -> None:
        status = answer.get("status")
        outcome = held.outcome or {}
        if status == 422 and outcome.get("outcome") == "completed":
            # The result was refused (too large, say): fail the attempt rather than hold it.
            detail = answer.get("detail") or "refused"
            with self._lock:
                held.outcome = {**_identity(held), "outcome": "failed", "error": f"result {detail}"}
            return
        if status != 200 and status not in GONE and status != 422:
            return  # kept: sent again with the next batch
        with self._lock:
            self._held.pop(held.job.id, None)
        self._log_outcome(held, outcome, status, answer)

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
        now = time.monotonic()
        items: list[dict[str, Any]] = []
        batch: list[tuple[Held, tuple[int, str | None] | None]] = []
        with self._lock:
            for held in self._held.values():
                if not held.beating:
                    continue
                progress = held.ctx.take_progress() if held.outcome is None else None
                if progress is None and now < held.next_beat:
                    continue
                item = _identity(held)
                if progress is not None:
                    item["progress"], message = progress
                    if message is not None:
                        item["message"] = message
                items.append(item)
                batch.append((held, progress))
                if len(items) == MAX_BATCH:
                    break
        if not items:
            return
        try:
            answers = self.client.heartbeat(items, retries=0)
        except Exception:
            for held, progress in batch:
                if progress is not None:
                    held.ctx.restore_progress(progress)
            raise
        for (held, _), answer in zip(batch, answers, strict=True):
            self._answered_heartbeat(held, answer, now)

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


def _identity(held: Held) -> dict[str, Any]:
    return {"id": held.job.id, "attempt": held.job.attempt}
