"""The reliability harness: client subprocesses, the job service with a clock, a direct look at
the database. Test modules import it; ``tests/reliability/conftest.py`` only makes fixtures."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flask import Flask
from sqlalchemy import Connection

from app.infra import db
from app.queue.rules.settings import QueueSettings
from app.queue.sql import jobs as jobs_sql
from app.queue.usecases import claiming, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import Event, Job
from devservers.servers import REPO
from tests.builders import make_job, make_user

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


def query(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Read the database file directly, as an outside observer."""
    conn = sqlite3.connect(path, timeout=10)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


T0 = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Queue:
    """The job service on the test app's SQLite file, with one actor per role and a clock."""

    app: Flask
    producer: Actor
    worker: Actor
    other_worker: Actor
    admin: Actor

    @property
    def settings(self) -> QueueSettings:
        return QueueSettings.from_config(self.app.config)

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        with db.transaction(self.app) as conn:
            yield conn

    def enqueue(self, now: datetime = T0, actor: Actor | None = None, **fields: Any) -> Job:
        with self.tx() as conn:
            return make_job(conn, actor or self.producer, self.settings, now=now, **fields)

    def claim(self, now: datetime = T0, actor: Actor | None = None, **kw: Any) -> Job | None:
        with self.tx() as conn:
            return claiming.claim(conn, actor or self.worker, now=now, settings=self.settings, **kw)

    def fail(self, job_id: int, now: datetime = T0, error: str = "boom", **kw: Any) -> Job:
        """The worker reports the job's attempt failed (``reports.fail``); the job after it."""
        with self.tx() as conn:
            return reports.fail(
                conn, self.worker, job_id, now=now, settings=self.settings, error=error, **kw
            ).value

    def job(self, job_id: int) -> Job:
        with db.read(self.app) as conn:
            found = jobs_sql.get_job(conn, job_id)
        assert found is not None
        return found

    def events(self, job_id: int) -> list[Event]:
        with db.read(self.app) as conn:
            return jobs_sql.list_events(conn, job_id)


def make_queue(app: Flask) -> Queue:
    """The service on ``app``'s database with one fresh user per role."""

    def actor(name: str, role: str) -> Actor:
        return make_user(app, name, role).actor()

    return Queue(
        app,
        producer=actor("svc-producer", "producer"),
        worker=actor("svc-worker", "worker"),
        other_worker=actor("svc-other-worker", "worker"),
        admin=actor("svc-admin", "admin"),
    )
