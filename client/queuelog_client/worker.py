"""``Worker``: claim jobs in batches, run their handlers on a thread pool, stop cleanly. One
request per cycle: the outcomes of the jobs that ended go with the claim of the next ones."""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Mapping
from types import FrameType
from typing import Any

from queuelog_client.client import Client
from queuelog_client.errors import QueuelogError, RateLimited, ServerError, Unreachable
from queuelog_client.handlers import Handler, run_handler
from queuelog_client.models import Job
from queuelog_client.reporter import Held, Reporter
from queuelog_client.tracing import job_context
from queuelog_client.transport import backoff

log = logging.getLogger("queuelog_client.worker")

MAX_CLAIM = 100  # the server's largest max_jobs
# With handlers running, how long to wait for a reason to claim now (no handler running, or half
# the slots free with an outcome to carry): jobs end one by one, and a claim per freed slot, or a
# claim beside each job's finish, would cost a request per job.
CLAIM_LINGER = 0.02
FLUSH_SECONDS = 10.0  # after the grace, how long outcomes may still take to be acknowledged
TRANSIENT = (Unreachable, ServerError, RateLimited)  # claim again later; anything else is fatal
# A repeat of the first stop signal this soon after it is the same request, not a second one:
# `timeout` and many supervisors signal the worker and then its process group, so one stop
# arrives twice within microseconds. A person's second Ctrl-C or `kill` comes later than this.
DUPLICATE_SIGNAL_SECONDS = 1.0


class Worker:
    """Runs ``handlers`` ({type: fn(ctx) -> dict | None}) for the jobs it claims.

    ``run()`` blocks until ``stop()`` (from any thread) or, when it runs in the main thread,
    SIGTERM/SIGINT; a second signal exits the process at once (the same signal again within
    ``DUPLICATE_SIGNAL_SECONDS`` of the first counts as the first). Stopping claims nothing more,
    releases claimed jobs not yet started, and gives running handlers ``grace`` seconds."""

    def __init__(
        self,
        client: Client,
        handlers: Mapping[str, Handler],
        concurrency: int = 8,
        types: list[str] | None = None,
        *,
        grace: float = 30.0,
        wait_seconds: float = 5.0,
        lease_seconds: int | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.types = list(types) if types is not None else list(handlers)
        if not self.types or set(self.types) - set(handlers):
            missing = ", ".join(sorted(set(self.types) - set(handlers))) or "none given"
            raise ValueError(f"every claimed type needs a handler (missing: {missing})")
        self.client = client
        self.handlers = dict(handlers)
        self.concurrency = concurrency
        self.grace = grace
        self.wait_seconds = wait_seconds  # long-poll: also how long a stop may wait for a claim
        self.lease_seconds = lease_seconds
        self.reporter = Reporter(client)
        self.abandoned = 0  # handlers still running when the grace ran out
        self.unreported = 0  # outcomes the server never acknowledged (their leases will expire)
        self._stopping = threading.Event()
        self._first_signal: tuple[int, float] | None = None  # (signum, monotonic time)
        self._queue: queue.Queue[Held | None] = queue.Queue()
        self._busy = 0  # claimed jobs whose handler has not returned (queued or running)
        self._slots = threading.Condition()

    @property
    def stats(self) -> str:
        """What became of the claimed jobs so far, as one line."""
        return self.reporter.stats.summary()

    def stop(self) -> None:
        """Ask ``run()`` to stop (safe from any thread and from signal handlers)."""
        self._stopping.set()
        with self._slots:
            self._slots.notify_all()

    def run(self) -> None:
        """Claim and run jobs until stopped; raises the ``QueuelogError`` that made claiming
        impossible (e.g. ``Unauthorized``) after shutting down cleanly."""
        previous = self._install_signals()
        self.reporter.start()
        threads = [
            threading.Thread(target=self._work, name=f"queuelog-handler-{n}", daemon=True)
            for n in range(self.concurrency)
        ]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        log.info("worker started: types %s, concurrency %d", ",".join(self.types), self.concurrency)
        try:
            self._claim_until_stopped()
        finally:
            self._shutdown(threads)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            log.info("worker stopped after %.1f s: %s", time.monotonic() - started, self.stats)

    def _claim_until_stopped(self) -> None:
        """The worker's one decision of what to send next: when slots are free, a claim of as
        many jobs, carrying every outcome ready by then (the reporter sends those that a
        long-poll would keep waiting)."""
        failures = 0
        while not self._stopping.is_set():
            free = self._wait_for_free_slots()
            if free == 0:
                continue
            carried = self.reporter.take_outcomes()
            try:
                finished = self.client.finish_and_claim(
                    [held.outcome or {} for held in carried],
                    max_jobs=min(free, MAX_CLAIM),
                    types=self.types,
                    wait_seconds=self.wait_seconds,
                    lease_seconds=self.lease_seconds,
                    retries=0,
                )
            except TRANSIENT as exc:
                self.reporter.give_back(carried)
                failures += 1
                delay = backoff(failures, base=0.5, cap=15.0)
                log.warning("claim failed (retrying in %.1f s): %s", delay, exc)
                self._stopping.wait(delay)
                continue
            except QueuelogError as exc:
                self.reporter.give_back(carried, alone=True)
                if carried:  # perhaps for their sake: they go alone, and the claim alone
                    log.warning("claim with %d outcome(s) refused: %s", len(carried), exc)
                    continue
                log.error("claim refused, stopping: %s", exc)
                raise
            except BaseException:  # a bug or an interrupt: the reporter still flushes them
                self.reporter.give_back(carried)
                raise
            failures = 0
            self.reporter.answered(carried, finished.results)
            self._start(finished.jobs)
            if finished.retry_after:  # the server had too many claims waiting
                self._stopping.wait(finished.retry_after)

    def _start(self, jobs: list[Job]) -> None:
        """Hold the claimed jobs (heartbeats start now) and queue them for the handlers."""
        for job in jobs:
            held = self.reporter.hold(job)
            with self._slots:
                self._busy += 1
            self._queue.put(held)  # started by a free handler thread, or released on stop

    def _wait_for_free_slots(self) -> int:
        """How many jobs to claim: 0 while every slot is busy (looked at again each second);
        with handlers running, first up to ``CLAIM_LINGER`` for a reason to claim now."""
        with self._slots:
            if self._busy >= self.concurrency and not self._stopping.is_set():
                self._slots.wait(timeout=1.0)
            if self._busy:
                self._slots.wait_for(self._worth_a_request, timeout=CLAIM_LINGER)
            return 0 if self._stopping.is_set() else self.concurrency - self._busy

    def _worth_a_request(self) -> bool:
        if self._stopping.is_set() or self._busy == 0:
            return True
        half_free = 2 * (self.concurrency - self._busy) >= self.concurrency
        return half_free and self.reporter.has_outcomes()

    def _work(self) -> None:
        while (held := self._queue.get()) is not None:
            handler = self.handlers.get(held.job.type)
            if self._stopping.is_set() or handler is None:
                self._release(held)  # not started: any worker may take it at once
                continue
            try:
                with job_context(held.job.trace):  # spans continue the enqueue's trace
                    outcome = run_handler(handler, held.ctx)
                self.reporter.finished(held, outcome)
            finally:  # even if the handler raised SystemExit, the slot is free again
                self._slot_done()

    def _slot_done(self) -> None:
        with self._slots:
            self._busy -= 1
            self._slots.notify_all()

    def _release(self, held: Held) -> None:
        """Give an unstarted job back: pending again at once for any worker."""
        try:
            self.client.release(held.job.id, held.job.attempt, retries=3)
            log.info("job %s %s: released unstarted", held.job.id, held.job.type)
            self.reporter.released(held, ok=True)
        except QueuelogError as exc:  # its lease brings it back instead
            log.warning("job %s: release failed, its lease will expire: %s", held.job.id, exc)
            self.reporter.released(held, ok=False)
        self._slot_done()

    def _shutdown(self, threads: list[threading.Thread]) -> None:
        self._stopping.set()
        while True:  # jobs claimed but not started go back now, not after their lease
            try:
                held = self._queue.get_nowait()
            except queue.Empty:
                break
            if held is not None:
                self._release(held)
        for _ in threads:
            self._queue.put(None)
        with self._slots:  # running handlers get the grace to finish
            self._slots.wait_for(lambda: self._busy == 0, timeout=self.grace)
            self.abandoned = self._busy
        if self.abandoned:
            log.warning("%d handler(s) still running after the grace", self.abandoned)
        self.unreported = self.reporter.close(time.monotonic() + FLUSH_SECONDS)
        if self.unreported:
            log.warning("%d outcome(s) could not be reported", self.unreported)

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self._first_signal is not None:
            first, at = self._first_signal
            if signum == first and now - at < DUPLICATE_SIGNAL_SECONDS:
                return  # the process group's copy of the first signal
            log.warning("second %s: exiting now", signal.Signals(signum).name)
            logging.shutdown()
            os._exit(128 + signum)
        self._first_signal = (signum, now)
        log.info(
            "%s: stopping (no more claims, %.0f s grace for running handlers)",
            signal.Signals(signum).name,
            self.grace,
        )
        self._stopping.set()  # no lock here: the main thread may hold it
