"""huey driven as its documentation shows, the peer of the end-to-end bench: its consumer with
worker processes on SqliteHuey (bench/huey_app.py), tasks enqueued one call each."""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from devservers.servers import REPO


class Huey:
    """huey's consumer (``workers`` processes, default polling) on SqliteHuey."""

    name = "huey"

    def __init__(self, folder: Path, synchronous: str, workers: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["BENCH_HUEY_FILE"] = str(folder / "huey.sqlite3")
        os.environ["BENCH_HUEY_SYNCHRONOUS"] = synchronous
        from bench import huey_app

        # Executed again: this run's file and level (a plain import would keep the last run's).
        self.app = importlib.reload(huey_app)
        self.log = (folder / "huey.log").open("wb")
        self.consumer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "huey.bin.huey_consumer",
                "bench.huey_app.huey",
                "-w",
                str(workers),
                "-k",
                "process",
            ],
            cwd=REPO,
            env=os.environ.copy(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
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
        held: dict[Any, float] = {}
        deadline = time.monotonic() + 30  # its idle consumer polls at most every 10 s
        while len(held) < len(self.results) and time.monotonic() < deadline:
            for task_id, result in self.results.items():
                if task_id not in held and (at := result.get(preserve=True)) is not None:
                    held[task_id] = at
            time.sleep(0.05)
        return held  # a job never picked up is left out

    def completed(self) -> int:
        return int(self.app.huey.storage.result_store_size())

    def counted(self, scenario: str, jobs: int) -> AbstractContextManager[None]:
        """Nothing to count: huey has no server between its producers and its workers."""
        return contextlib.nullcontext()

    def close(self) -> None:
        self.consumer.terminate()
        self.consumer.wait(15)
        self.log.close()
