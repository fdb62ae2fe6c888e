"""End to end: queuelog through its Python SDK (``make serve``'s gunicorn) next to huey.

Three scenarios per system, 4 worker processes each: bulk (enqueue N in batches, drain),
trickle (4 producer threads, one enqueue per job), pickup latency (one job every 50 ms into an
idle queue, enqueue to a worker holding it). Queuelog's workers run ``queuelog_client.Worker``
(``WORKER_LOOP``, one swappable function), so the figures are the ones SDK users get.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from tests.servers import REPO, Database, Gunicorn, prepare_database

WORKERS = 4
# Handler threads per worker process: no-op jobs never block, so this only bounds how many
# jobs one claim may take (max_jobs) and how many outcomes go in one /jobs/finish.
CONCURRENCY = 32
BATCH = 100  # jobs per POST /jobs/batch in the bulk scenario
PICKUP_EVERY = 0.05
PICKUP_JOBS = 100  # 5 s of one job every 50 ms: p99 is the second-worst
JOB_TYPE = "email.send"
USERS = {"producer": "producer", "worker": "worker"}


def work_with_sdk(host: str, token: str, held: Any, stop: Any) -> None:
    """One worker process: ``queuelog_client.Worker`` with a no-op handler until ``stop``.

    ``held`` receives (job id, time.time()) when a handler starts a job marked ``pickup``.
    """
    from queuelog_client import Client, JobContext, Worker

    def noop(ctx: JobContext) -> None:
        if ctx.payload.get("pickup"):
            held.put((ctx.id, time.time()))

    with Client(f"http://{host}", token, timeout=30) as client:
        worker = Worker(client, {JOB_TYPE: noop}, concurrency=CONCURRENCY, grace=5)
        threading.Thread(target=lambda: (stop.wait(), worker.stop()), daemon=True).start()
        worker.run()


WORKER_LOOP: Callable[[str, str, Any, Any], None] = work_with_sdk


class System(Protocol):
    name: str

    def enqueue(self, tag: int) -> Any: ...
    def enqueue_bulk(self, jobs: int) -> None: ...
    def completed(self) -> int: ...
    def held_at(self) -> dict[Any, float]: ...


class Queuelog:
    """gunicorn with gunicorn.conf.py on a fresh database, and 4 SDK worker processes."""

    name = "queuelog"

    def __init__(self, folder: Path, url: str | None = None, **config: Any) -> None:
        self.database: Database = prepare_database(folder / "db", USERS, url=url)
        self.server = Gunicorn(self.database, folder, workers=WORKERS, **config).start()
        context = mp.get_context("spawn")
        self.held, self.stop = context.Queue(), context.Event()
        self.workers = [
            context.Process(
                target=WORKER_LOOP,
                args=(self.server.host, self.database.tokens["worker"], self.held, self.stop),
            )
            for _ in range(WORKERS)
        ]
        for process in self.workers:
            process.start()
        self.local = threading.local()
        self._held: dict[Any, float] = {}
        self._url = self.database.url
        time.sleep(1.0)  # let the workers import and start long-polling, as huey's consumer does

    def _client(self) -> Any:
        from queuelog_client import Client

        if not hasattr(self.local, "client"):
            token = self.database.tokens["producer"]
            self.local.client = Client(f"http://{self.server.host}", token)
        return self.local.client

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
                return int(
                    conn.execute("SELECT count(*) FROM jobs WHERE status='completed'").fetchone()[0]
                )
        import psycopg

        with psycopg.connect(self._url.replace("postgresql+psycopg", "postgresql")) as conn:
            row = conn.execute("SELECT count(*) FROM jobs WHERE status='completed'").fetchone()
            return int(row[0]) if row else 0

    def close(self) -> None:
        self.stop.set()
        for process in self.workers:
            process.join(15)
            if process.is_alive():
                process.kill()
        self.server.stop()


class Huey:
    """huey's consumer (4 worker processes, default polling) on SqliteHuey."""

    name = "huey"

    def __init__(self, folder: Path, synchronous: str) -> None:
        os.environ["BENCH_HUEY_FILE"] = str(folder / "huey.sqlite3")
        os.environ["BENCH_HUEY_SYNCHRONOUS"] = synchronous
        sys.modules.pop("bench.huey_app", None)
        from bench import huey_app

        self.app = huey_app
        self.log = (folder / "huey.log").open("wb")
        self.consumer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "huey.bin.huey_consumer",
                "bench.huey_app.huey",
                "-w",
                str(WORKERS),
                "-k",
                "process",
            ],
            cwd=REPO,
            env=os.environ.copy(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        time.sleep(1.0)  # let its processes start, as queuelog's workers have
        self.results: dict[Any, Any] = {}

    def enqueue(self, tag: int) -> Any:
        if tag >= 0:
            return self.app.noop().id
        result = self.app.picked_up()
        self.results[result.id] = result  # only these are read back, for their pickup time
        return result.id

    def enqueue_bulk(self, jobs: int) -> None:
        for _ in range(jobs):  # huey has no batch enqueue: one call per task
            self.app.noop()

    def held_at(self) -> dict[Any, float]:
        from huey.exceptions import ResultTimeout

        held = {}
        for task_id, result in self.results.items():
            # its idle consumer polls at most every 10 s; a job never picked up is left out
            with contextlib.suppress(ResultTimeout):
                held[task_id] = result.get(blocking=True, timeout=30)
        return held

    def completed(self) -> int:
        return int(self.app.huey.storage.result_store_size())

    def close(self) -> None:
        self.consumer.terminate()
        self.consumer.wait(15)
        self.log.close()


def wait_completed(system: System, count: int, start: float) -> float:
    """Jobs/s from ``start`` until ``count`` jobs are completed (bounded at 90 s)."""
    deadline = time.monotonic() + 90
    while system.completed() < count and time.monotonic() < deadline:
        time.sleep(0.01)
    done = system.completed()
    return min(done, count) / (time.perf_counter() - start) if done else 0.0


def bulk(system: System, jobs: int) -> float:
    """One producer enqueues ``jobs`` (in batches where the system has them); jobs/s drained."""
    base, start = system.completed(), time.perf_counter()
    system.enqueue_bulk(jobs)
    return wait_completed(system, base + jobs, start)


def trickle(system: System, jobs: int, threads: int = 4) -> float:
    """``threads`` producers enqueue one job per call; jobs/s until all are completed."""
    base, start = system.completed(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(system.enqueue, range(jobs)))
    return wait_completed(system, base + jobs, start)


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


def scenarios(system: System, jobs: int) -> dict[str, float]:
    """Every figure for one running system (the three scenarios share its workers)."""
    figures = {"bulk": bulk(system, jobs), "trickle": trickle(system, jobs)}
    figures["p50"], figures["p99"] = pickup(system, PICKUP_JOBS)
    return figures


def jobs_per_section() -> int:
    """Jobs per bulk and trickle run (``BENCH_E2E_JOBS``), small enough for ~1 minute."""
    return int(os.environ.get("BENCH_E2E_JOBS", "1000"))


def line(name: str, ours: float, theirs: float, unit: str, peer: str) -> None:
    """One figure of each side and their ratio (above 1: queuelog does better)."""
    better = ours / theirs if unit == "jobs/s" else theirs / ours
    print(
        f"  {name:<28} queuelog {ours:9.1f} {unit:<6} {peer} {theirs:9.1f} {unit:<6} "
        f"ratio {better:5.2f}"
    )


def run(base: Path) -> None:
    """queuelog (SDK workers: batched claims, long-poll, batched outcomes) vs huey, at
    synchronous FULL and NORMAL."""
    jobs = jobs_per_section()
    for level in ("FULL", "NORMAL"):
        print(f"end to end, SQLite synchronous={level}, {jobs} no-op jobs, 4 worker processes:")
        figures = {}
        for name in ("queuelog", "huey"):
            folder = base / f"{name}-{level}"
            folder.mkdir()
            system: Any = (
                Queuelog(folder, SQLITE_SYNCHRONOUS=level)
                if name == "queuelog"
                else Huey(folder, level)
            )
            try:
                figures[name] = scenarios(system, jobs)
            finally:
                system.close()
        ours, theirs = figures["queuelog"], figures["huey"]
        line(f"bulk (batches of {BATCH})", ours["bulk"], theirs["bulk"], "jobs/s", "huey")
        line("trickle (4 producers)", ours["trickle"], theirs["trickle"], "jobs/s", "huey")
        line("pickup p50", ours["p50"], theirs["p50"], "ms", "huey")
        line("pickup p99", ours["p99"], theirs["p99"], "ms", "huey")
