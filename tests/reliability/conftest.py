"""Helpers for the reliability tests: client subprocesses and a direct look at the database."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import REPO

AGENT_TIMEOUT = 90.0


class Agents:
    """Client processes (``tests.reliability.agents``) of one test, all reaped at its end."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[str]] = []

    def spawn(self, mode: str, host: str, token: str, **options: Any) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "tests.reliability.agents", mode, "--host", host]
        argv += ["--token", token]
        for name, value in options.items():
            argv += [f"--{name}", str(value)]
        process = subprocess.Popen(
            argv,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.processes.append(process)
        return process

    @staticmethod
    def result(process: subprocess.Popen[str]) -> dict[str, Any]:
        """Wait (bounded) for an agent and decode its JSON report."""
        out, err = process.communicate(timeout=AGENT_TIMEOUT)
        assert process.returncode == 0, f"agent {process.pid} exited {process.returncode}: {err}"
        return json.loads(out)  # type: ignore[no-any-return]

    def kill_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()  # by its own pid
                process.wait(10)
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()


@pytest.fixture
def agents() -> Iterator[Agents]:
    spawned = Agents()
    yield spawned
    spawned.kill_all()


def query(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Read the database file directly, as an outside observer."""
    conn = sqlite3.connect(path, timeout=10)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
