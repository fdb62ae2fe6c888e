"""End to end: queuelog through its HTTP API (``make serve``'s gunicorn) next to huey.

Three scenarios per system, 4 worker processes each: bulk (enqueue N, drain), trickle (4
producer threads, one enqueue per job), pickup latency (one job every 50 ms into an idle queue,
enqueue to a worker holding it). Queuelog's worker loop is ``work_single_routes``, one swappable
function.
"""

from __future__ import annotations

import contextlib
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

from tests.servers import REPO, Client, Database, Gunicorn, prepare_database

WORKERS = 4
PICKUP_EVERY = 0.05
USERS = {"producer": "producer", "worker": "worker"}


def work_single_routes(host: str, token: str, held: Any, stop: Any) -> None:
    """One worker process: long-poll ``/jobs/claim``, complete, repeat until ``stop`` is set.

    ``held`` receives (job id, time.time()) when a job is in the worker's hands.
    """
    client = Client(host, token, timeout=30)
    while not stop.is_set():
        status, job, _ = client.post("/jobs/claim", {"wait_seconds": 1})
        if status != 200:
            continue
        held.put((job["id"], time.time()))
        client.post(f"/jobs/{job['id']}/complete", {"attempt": job["attempt"]})
    client.close()


WORKER_LOOP: Callable[[str, str, Any, Any], None] = work_single_routes


class System(Protocol):
    name: str

    def enqueue(self, tag: int) -> Any: ...
    def completed(self) -> int: ...
    def held_at(self) -> dict[Any, float]: ...


class Queuelog:
    """gunicorn with gunicorn.conf.py on a fresh database, and 4 worker processes."""

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

    def _client(self) -> Client:
        if not hasattr(self.local, "client"):
            self.local.client = Client(self.server.host, self.database.tokens["producer"])
        return self.local.client  # type: ignore[no-any-return]

    def enqueue(self, tag: int) -> Any:
        status, job, _ = self._client().post("/jobs", {"type": "email.send"})
        assert status == 201, (status, job)
        return job["id"]

    def held_at(self) -> dict[Any, float]:
        while not self.held.empty():
            job_id, at = self.held.get()
            self._held[job_id] = at
        return self._held

    def completed(self) -> int:
        if self._url.startswith("sqlite"):
            with sqlite3.connect(self.database.path) as conn:
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
            process.join(10)
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


def drain(system: System, jobs: int, threads: int) -> float:
    """Enqueue ``jobs`` from ``threads`` producer threads; jobs/s until all are completed."""
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(system.enqueue, range(jobs)))
    deadline = time.monotonic() + 120
    while system.completed() < jobs and time.monotonic() < deadline:
        time.sleep(0.01)
    return jobs / (time.perf_counter() - start)


def pickup(system: System, jobs: int) -> tuple[float, float]:
    """One job every 50 ms into an idle queue; (p50, p99) ms from enqueue to held."""
    sent: dict[Any, float] = {}
    for n in range(jobs):
        at = time.time()
        sent[system.enqueue(-1 - n)] = at
        time.sleep(max(0.0, PICKUP_EVERY - (time.time() - at)))
    time.sleep(1.0)
    held = system.held_at()
    latencies = sorted((held[i] - at) * 1000 for i, at in sent.items() if i in held)
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


def scenarios(system: System, jobs: int) -> dict[str, float]:
    """Every figure for one running system (bulk and trickle reuse its workers)."""
    bulk = drain(system, jobs, threads=1)
    base = system.completed()
    start = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(system.enqueue, range(jobs)))
    while system.completed() < base + jobs and time.perf_counter() - start < 120:
        time.sleep(0.01)
    trickle = jobs / (time.perf_counter() - start)
    p50, p99 = pickup(system, max(40, jobs // 10))
    return {"bulk": bulk, "trickle": trickle, "p50": p50, "p99": p99}


def jobs_per_section() -> int:
    """Jobs per bulk and trickle run (``BENCH_E2E_JOBS``), small enough for ~1 minute."""
    return int(os.environ.get("BENCH_E2E_JOBS", "400"))


def line(name: str, ours: float, theirs: float, unit: str, peer: str) -> None:
    """One figure of each side and their ratio (above 1: queuelog does better)."""
    better = ours / theirs if unit == "jobs/s" else theirs / ours
    print(
        f"  {name:<28} queuelog {ours:9.1f} {unit:<6} {peer} {theirs:9.1f} {unit:<6} "
        f"ratio {better:5.2f}"
    )


def run(base: Path) -> None:
    """queuelog (single-job routes, long-poll) vs huey at synchronous FULL and NORMAL."""
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
        line("bulk (1 producer)", ours["bulk"], theirs["bulk"], "jobs/s", "huey")
        line("trickle (4 producers)", ours["trickle"], theirs["trickle"], "jobs/s", "huey")
        line("pickup p50", ours["p50"], theirs["p50"], "ms", "huey")
        line("pickup p99", ours["p99"], theirs["p99"], "ms", "huey")
