"""End to end: queuelog through its Python SDK (``make serve``'s server) next to huey.

Three scenarios per system, 4 worker processes each: bulk (enqueue N in batches, drain),
trickle (4 producer threads sharing one client, one enqueue per job), pickup latency (one job
every 50 ms into an idle queue, enqueue to a worker holding it). Queuelog's workers run
``queuelog_client.Worker`` (``WORKER_LOOP``, one swappable function), so the figures are the
ones SDK users get.

Both systems run side by side; in each round every scenario runs on one right after the other
(the order alternating), each time after draining a small warm-up batch, so neither is measured
cold (process start-up, imports, an idle consumer's polling back-off) and a load change on the
shared machine hits both. Each figure is the median, and the best, of the rounds. Beside them,
the requests queuelog's server answered per job in the bulk and trickle runs, from its own
counters (bench/server_counts.py); huey is driven by bench/huey_peer.py.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import sqlite3
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from bench.huey_peer import Huey
from bench.references import against_reference
from bench.scale import worker_rss_mb
from bench.server_counts import Requests
from devservers.servers import Database, Served, prepare_database

# Handler threads per worker process. The Worker claims as many jobs as it has free slots (at
# most 100), and no-op jobs free theirs at once, so 50 slots make every claim ask for 50 jobs.
CONCURRENCY = 50
BATCH = 100  # jobs per POST /jobs/batch in the bulk scenario
PICKUP_EVERY = 0.05
PICKUP_JOBS = 100  # 5 s of one job every 50 ms: p99 is the second-worst
WARM_UP = 100  # jobs drained before each measured run
JOB_TYPE = "email.send"
WORKERS = 4
USERS = {"producer": "producer", "worker": "worker", "monitor": "monitor"}
# Slots of the counters the worker processes share: claims that returned jobs and the jobs they
# returned, /jobs/finish requests and the outcomes they carried (a finish that claims counts as
# both). They show how the client batches its requests in the runs measured, rather than how it
# is meant to.
CLAIMS, CLAIMED, FINISHES, FINISHED = range(4)


def work_with_sdk(host: str, token: str, held: Any, stop: Any, counts: Any) -> None:
    """One worker process: ``queuelog_client.Worker`` with a no-op handler until ``stop``.

    ``held`` receives (job id, time.time()) when a handler starts a job marked ``pickup``;
    ``counts`` (a shared array) counts the claims and finishes the Worker sends.
    """
    from queuelog_client import Client, JobContext, Worker

    class CountingClient(Client):
        """The SDK's client, counting its claims and finishes (requests and jobs)."""

        def finish_and_claim(self, results: Any, **kwargs: Any) -> Any:
            finished = super().finish_and_claim(results, **kwargs)  # and every claim()
            self.counted(CLAIMS, finished.jobs)
            self.counted(FINISHES, finished.results)  # outcomes that rode on a claim
            return finished

        def finish(self, results: Any, **kwargs: Any) -> Any:
            return self.counted(FINISHES, super().finish(results, **kwargs))

        @staticmethod
        def counted(slot: int, answer: list[Any]) -> list[Any]:
            if answer:  # an empty long-poll claim is idling, not a batch
                with counts.get_lock():
                    counts[slot] += 1
                    counts[slot + 1] += len(answer)
            return answer

    def noop(ctx: JobContext) -> None:
        if ctx.payload.get("pickup"):
            held.put((ctx.id, time.time()))

    with CountingClient(f"http://{host}", token, timeout=30) as client:
        worker = Worker(client, {JOB_TYPE: noop}, concurrency=CONCURRENCY, grace=5)

        def stop_when_told() -> None:
            stop.wait()
            worker.stop()

        threading.Thread(target=stop_when_told, daemon=True).start()
        worker.run()


WORKER_LOOP: Callable[[str, str, Any, Any, Any], None] = work_with_sdk


class System(Protocol):
    name: str

    def enqueue(self, tag: int) -> Any: ...
    def enqueue_bulk(self, jobs: int) -> None: ...
    def completed(self) -> int: ...
    def held_at(self) -> dict[Any, float]: ...
    def counted(self, scenario: str, jobs: int) -> AbstractContextManager[None]: ...


# The completed jobs, from the counters the server keeps: polled every 10 ms while the workers
# drain, a count(*) of the jobs table would itself be a load on the database that grows with it.
COMPLETED = "SELECT coalesce(sum(completed), 0) FROM job_counts WHERE scope = '*'"


class Queuelog:
    """``make serve``'s server on a fresh database, and 4 SDK worker processes."""

    name = "queuelog"

    def __init__(self, folder: Path, url: str | None = None, **config: Any) -> None:
        self.database: Database = prepare_database(folder / "db", USERS, url=url)
        self.server = Served(self.database, folder, workers=WORKERS, **config).start()
        context = mp.get_context("spawn")
        self.held, self.stop = context.Queue(), context.Event()
        self.counts = context.Array("q", 4)
        token = self.database.tokens["worker"]
        work = (self.server.host, token, self.held, self.stop, self.counts)
        self.workers = [context.Process(target=WORKER_LOOP, args=work) for _ in range(WORKERS)]
        for process in self.workers:
            process.start()
        self.lock = threading.Lock()
        self.client: Any = None
        self._held: dict[Any, float] = {}
        self._url = self.database.url
        self.watch: Any = None  # the PostgreSQL connection that counts completed jobs
        self.requests = Requests(self.server.host, self.database.tokens["monitor"])
        self.peaks: list[int] = []  # read as the server stops, for a report printed after

    def counted(self, scenario: str, jobs: int) -> AbstractContextManager[None]:
        """Count the requests the server answers meanwhile (bench.server_counts)."""
        return self.requests.counted(scenario, jobs)

    def print_requests(self) -> None:
        """The requests per job of every scenario counted, and the server processes' memory."""
        self.requests.print()
        peaks = self.peaks or self._peaks()
        print(f"  server processes' peak resident memory: {peaks} MB (goal: <= 80 each)")

    def _peaks(self) -> list[int]:
        """The most resident memory each server process has held so far, in MB."""
        assert self.server.process is not None
        return worker_rss_mb(self.server.process.pid, "VmHWM")

    def _client(self) -> Any:
        """One client shared by the producer threads, as a web app's request threads share one
        (the client's docs): their enqueue calls coalesce while a request is in flight."""
        from queuelog_client import Client

        with self.lock:
            if self.client is None:
                token = self.database.tokens["producer"]
                self.client = Client(f"http://{self.server.host}", token)
            return self.client

    def enqueue(self, tag: int) -> Any:
        payload = {"pickup": True} if tag < 0 else {}
        return self._client().enqueue(JOB_TYPE, payload).id

    def enqueue_bulk(self, jobs: int) -> None:
        client = self._client()
        for start in range(0, jobs, BATCH):
            client.enqueue_many([{"type": JOB_TYPE}] * min(BATCH, jobs - start))

    def held_at(self) -> dict[Any, float]:
        while not self.held.empty():
            job_id, at = self.held.get()
            self._held[job_id] = at
        return self._held

    def completed(self) -> int:
        if self._url.startswith("sqlite"):
            with contextlib.closing(sqlite3.connect(self.database.path)) as conn:
                return int(conn.execute(COMPLETED).fetchone()[0])
        if self.watch is None:  # one connection: a new one per poll costs a server process
            import psycopg

            url = self._url.replace("postgresql+psycopg", "postgresql")
            self.watch = psycopg.connect(url, autocommit=True)
        row = self.watch.execute(COMPLETED).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.stop.set()
        for process in self.workers:
            process.join(15)
            if process.is_alive():
                process.kill()
        if self.watch is not None:
            self.watch.close()
        self.peaks = self._peaks()
        self.server.stop()


def wait_completed(system: System, base: int, jobs: int, start: float) -> float:
    """Jobs/s from ``start`` until ``jobs`` more than ``base`` are completed (bounded at 90 s)."""
    deadline = time.monotonic() + 90
    while system.completed() - base < jobs and time.monotonic() < deadline:
        time.sleep(0.01)
    done = min(system.completed() - base, jobs)
    return done / (time.perf_counter() - start)


def warm_up(system: System) -> None:
    """Drain a few jobs first: the workers are up, connected and busy, as in steady use."""
    base = system.completed()
    system.enqueue_bulk(WARM_UP)
    wait_completed(system, base, WARM_UP, time.perf_counter())


def bulk(system: System, jobs: int) -> float:
    """One producer enqueues ``jobs`` (in batches where the system has them); jobs/s drained."""
    base, start = system.completed(), time.perf_counter()
    system.enqueue_bulk(jobs)
    return wait_completed(system, base, jobs, start)


def trickle(system: System, jobs: int, threads: int = 4) -> float:
    """``threads`` producers enqueue one job per call; jobs/s until all are completed."""
    base, start = system.completed(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(system.enqueue, range(jobs)))
    return wait_completed(system, base, jobs, start)


def pickup(system: System, jobs: int) -> tuple[float, float]:
    """One job every 50 ms into an idle queue; (p50, p99) ms from enqueue to held."""
    sent: dict[Any, float] = {}
    for n in range(jobs):
        at = time.time()
        sent[system.enqueue(-1 - n)] = at
        time.sleep(max(0.0, PICKUP_EVERY - (time.time() - at)))
    time.sleep(1.0)
    held = system.held_at()
    return percentiles([(held[i] - at) * 1000 for i, at in sent.items() if i in held])


def percentiles(latencies: list[float]) -> tuple[float, float]:
    """(p50, p99) of ``latencies`` (nearest rank); nan when nothing was picked up."""
    if not latencies:
        return float("nan"), float("nan")
    ordered = sorted(latencies)
    return statistics.median(ordered), ordered[max(0, math.ceil(len(ordered) * 0.99) - 1)]


def measure(systems: dict[str, Any], jobs: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Every figure of every system, ``rounds`` times, each scenario on one system right after
    the other (the order alternating between rounds), each run after a warm-up."""
    figures: dict[str, dict[str, list[float]]] = {name: {} for name in systems}

    def add(name: str, figure: str, value: float) -> None:
        figures[name].setdefault(figure, []).append(value)

    for n in range(rounds):
        order = list(systems) if n % 2 == 0 else list(reversed(systems))
        for name in order:
            warm_up(systems[name])
            with systems[name].counted("bulk", jobs):
                add(name, "bulk", bulk(systems[name], jobs))
        for name in order:
            warm_up(systems[name])
            with systems[name].counted("trickle", jobs):
                add(name, "trickle", trickle(systems[name], jobs))
        for name in order:
            warm_up(systems[name])
            p50, p99 = pickup(systems[name], PICKUP_JOBS)
            add(name, "p50", p50)
            add(name, "p99", p99)
    return figures


def jobs_per_section() -> int:
    """Jobs per bulk and trickle run (``BENCH_E2E_JOBS``), small enough for ~1 minute."""
    return int(os.environ.get("BENCH_E2E_JOBS", "1000"))


def rounds_per_section() -> int:
    """Rounds of every scenario (``BENCH_E2E_ROUNDS``)."""
    return int(os.environ.get("BENCH_E2E_ROUNDS", "3"))


def load() -> str:
    """The 1-minute load average, which says how busy the machine was."""
    return f"{os.getloadavg()[0]:.1f}"


def fsync_ms(folder: Path, samples: int = 30) -> str:
    """The median time of writing 4 KiB and fsyncing it here: what every durable commit (of
    either system) waits for at least once."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fsync-probe"
    times = []
    with path.open("wb") as file:
        for _ in range(samples):
            file.write(b"x" * 4096)
            file.flush()
            start = time.perf_counter()
            os.fsync(file.fileno())
            times.append((time.perf_counter() - start) * 1000)
    path.unlink()
    return f"{statistics.median(times):.1f} ms"


def line(
    name: str,
    ours: list[float],
    theirs: list[float],
    unit: str,
    peer: str,
    reference: str | None = None,
    peer_ran: bool = True,
) -> None:
    """The median (and best) of each side and the ratio of the medians (above 1: queuelog does
    better), and how the peer's median stands against its ``reference`` (bench.references):
    no ratio when it is far below, nor when the peer's bulk in the same run was (``peer_ran``
    false: the machine was too busy for the peer's figures to mean much)."""
    higher = unit == "jobs/s"
    mid, top = statistics.median, (max if higher else min)
    ratio = mid(ours) / mid(theirs) if higher else mid(theirs) / mid(ours)
    allowed, note = against_reference(reference, mid(theirs)) if reference else (True, "")
    if not peer_ran:
        allowed, note = False, f"ratio not reported: {peer}'s bulk far below its reference"
    print(
        f"  {name:<28} queuelog {mid(ours):8.1f} ({top(ours):8.1f}) {unit:<6} "
        f"{peer} {mid(theirs):8.1f} ({top(theirs):8.1f}) {unit:<6} "
        + (f"ratio {ratio:5.2f}{note}" if allowed else note)
    )


def run(base: Path) -> None:
    """queuelog (SDK workers: batched claims, long-poll, batched outcomes) vs huey, at
    synchronous FULL and NORMAL."""
    jobs, rounds = jobs_per_section(), rounds_per_section()
    for level in ("FULL", "NORMAL"):
        print(
            f"end to end, SQLite synchronous={level}, {jobs} no-op jobs, 4 worker processes, "
            f"median (best) of {rounds} rounds:"
        )
        started, fsync = load(), fsync_ms(base)
        systems: dict[str, Any] = {}
        try:
            systems["queuelog"] = Queuelog(base / f"queuelog-{level}", SQLITE_SYNCHRONOUS=level)
            systems["huey"] = Huey(base / f"huey-{level}", level, WORKERS)
            figures = measure(systems, jobs, rounds)
        finally:
            for system in systems.values():
                system.close()
        ours, theirs = figures["queuelog"], figures["huey"]
        line(
            f"bulk (batches of {BATCH})",
            ours["bulk"],
            theirs["bulk"],
            "jobs/s",
            "huey",
            reference=f"huey {level}",
        )
        huey_ran, _ = against_reference(f"huey {level}", statistics.median(theirs["bulk"]))
        line(
            "trickle (4 producers)",
            ours["trickle"],
            theirs["trickle"],
            "jobs/s",
            "huey",
            peer_ran=huey_ran,
        )
        line("pickup p50", ours["p50"], theirs["p50"], "ms", "huey")
        line("pickup p99 (goal: <= 50 ms)", ours["p99"], theirs["p99"], "ms", "huey")
        systems["queuelog"].print_requests()
        print(f"  load average {started} at the start, {load()} at the end; fsync {fsync}")
