"""The Worker, the runner and enqueue_many against a real gunicorn server.

NOT COLLECTED YET: these tests wait for the server routes they use (DESIGN §8.1: POST /jobs/batch,
POST /jobs/claim with max_jobs/types/wait_seconds, POST /jobs/finish, POST /jobs/heartbeat,
POST /jobs/{id}/release). Once the server has them, rename this file to test_worker.py.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Server, start_server
from queuelog_client import Client, Fail, JobContext, Retry, Worker

import tests.servers

pytestmark = pytest.mark.slow

LEASE = 15  # seconds: heartbeats every 5 s, and a claim lost in a crash comes back quickly
HANDLERS_MODULE = """
import os, pathlib, time
LOG = pathlib.Path(os.environ["HANDLER_LOG"])

def note(word, ctx):
    with LOG.open("a") as f:
        f.write(f"{word} {ctx.id} {ctx.attempt}\\n")

def sleepy(ctx):
    note("start", ctx)
    time.sleep(ctx.payload.get("seconds", 0))
    note("end", ctx)
    return {"slept": ctx.payload.get("seconds", 0)}

HANDLERS = {"report.build": sleepy}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server of this test's own, so that no other test's jobs are claimed."""
    yield from start_server(tmp_path, LEASE_SECONDS=LEASE)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.3)  # the predicates read the API: leave the server to the worker


class Running:
    """A Worker running in a thread of the test; stopped (bounded) at the end."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run)
        self.thread.start()

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the worker did not stop"


def statuses(client: Client, ids: list[int]) -> collections.Counter[str]:
    wanted = set(ids)
    return collections.Counter(j.status for j in client.jobs(limit=1000) if j.id in wanted)


def transitions(client: Client, job_id: int, to_status: str) -> int:
    return sum(1 for e in client.events(job_id) if e.to_status == to_status)


def test_enqueue_many_sends_batches_and_keeps_the_order(server: Server) -> None:
    items = [{"type": "email.send", "payload": {"n": n}} for n in range(2500)]
    with server.client("producer") as producer:
        jobs = producer.enqueue_many(items)
        assert [j.payload["n"] for j in jobs] == list(range(2500))
        assert len({j.id for j in jobs}) == 2500
        keyed = [{**item, "idempotency_key": f"k{n}"} for n, item in enumerate(items[:10])]
        first, again = producer.enqueue_many(keyed), producer.enqueue_many(keyed)
        assert [j.id for j in first] == [j.id for j in again]


def test_a_thousand_jobs_with_eight_threads_complete_exactly_once(server: Server) -> None:
    executions: collections.Counter[int] = collections.Counter()
    lock = threading.Lock()

    def handler(ctx: JobContext) -> dict[str, Any]:
        with lock:
            executions[ctx.id] += 1
        return {"n": ctx.payload["n"]}

    with server.client("producer") as producer, server.client("worker") as client:
        jobs = producer.enqueue_many(
            [{"type": "email.send", "payload": {"n": n}} for n in range(1000)]
        )
        ids = [job.id for job in jobs]
        started = time.monotonic()
        running = Running(Worker(client, {"email.send": handler}, concurrency=8))
        try:
            wait_until(lambda: statuses(producer, ids)["completed"] == 1000, 180, "1,000 jobs")
            elapsed = time.monotonic() - started
        finally:
            running.stop()
        finished = {job.id: job for job in producer.jobs(status="completed", limit=1000)}
        assert all(
            finished[i].result == {"n": n} and finished[i].attempt == 1 for n, i in enumerate(ids)
        )
        assert executions == collections.Counter(ids)  # each handler ran once
        assert all(transitions(producer, i, "completed") == 1 for i in ids)
        assert running.worker.reporter.stats.completed == 1000
    print(f"1,000 jobs, concurrency 8: {1000 / elapsed:.0f} jobs/s, 0 duplicates, 0 lost")


def test_the_handler_chooses_the_outcome_and_sees_progress_and_cancel(server: Server) -> None:
    release_progress = threading.Event()
    seen_cancel: list[float] = []

    def handler(ctx: JobContext) -> dict[str, Any] | None:
        kind = ctx.payload["kind"]
        if kind == "retry":
            raise Retry(after=3600)
        if kind == "fail":
            raise Fail("bad address")
        if kind == "boom":
            raise ValueError("boom")
        if kind == "progress":
            ctx.progress(50, "half way")
            release_progress.wait(30)
            return {"done": True}
        deadline = time.monotonic() + 60  # "cancel": work until told to stop
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.05)
        seen_cancel.append(time.monotonic())
        return None

    kinds = ["retry", "fail", "boom", "progress", "cancel"]
    with server.client("producer") as producer, server.client("admin") as admin:
        job = {
            k: producer.enqueue("email.send", {"kind": k}, max_retries=0 if k == "boom" else 3)
            for k in kinds
        }
        with server.client("worker") as client:
            running = Running(Worker(client, {"email.send": handler}, concurrency=5))
            try:
                wait_until(lambda: admin.get(job["progress"].id).progress == 50, 30, "progress")
                release_progress.set()
                wait_until(lambda: admin.get(job["cancel"].id).status == "running", 30, "running")
                admin.cancel(job["cancel"].id)
                cancelled_at = time.monotonic()
                wait_until(lambda: bool(seen_cancel), 30, "the handler to see the cancel")
                wait_until(lambda: admin.get(job["progress"].id).status == "completed", 30, "done")
                wait_until(lambda: admin.get(job["boom"].id).status == "failed", 30, "boom")
            finally:
                running.stop()
        assert seen_cancel[0] - cancelled_at < 15  # a heartbeat (every 5 s) carried the news
        retried = admin.get(job["retry"].id)
        assert retried.status == "pending" and retried.retry_count == 1
        assert retried.run_at is not None and retried.run_at > datetime.now(UTC) + timedelta(
            minutes=55
        )
        failed = admin.get(job["fail"].id)
        assert failed.status == "failed" and failed.error == "bad address"
        assert admin.get(job["boom"].id).error == "ValueError: boom"
        assert admin.get(job["progress"].id).result == {"done": True}
        assert admin.get(job["cancel"].id).status == "cancelled"


class Runner:
    """``queuelog-worker`` as a subprocess with a handlers module that logs each execution."""

    def __init__(self, server: Server, directory: Path) -> None:
        self.server = server
        self.directory = directory
        (directory / "sleepy_handlers.py").write_text(HANDLERS_MODULE)
        self.log = directory / "executions.log"
        self.log.touch()
        self.process: subprocess.Popen[str] | None = None

    def start(self, *options: str) -> Runner:
        env = {**os.environ, "QUEUELOG_TOKEN": self.server.database.tokens["worker"]}
        env["HANDLER_LOG"] = str(self.log)
        argv = [sys.executable, "-m", "queuelog_client.cli", "sleepy_handlers:HANDLERS"]
        self.process = subprocess.Popen(
            [*argv, "--url", self.server.url, *options],
            cwd=self.directory,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        return self

    def lines(self, word: str) -> collections.Counter[int]:
        rows = [line.split() for line in self.log.read_text().splitlines()]
        return collections.Counter(int(row[1]) for row in rows if row[0] == word)

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def wait(self, timeout: float) -> tuple[int, str]:
        assert self.process is not None
        _, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, err

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.communicate(timeout=10)


@pytest.fixture
def runner(server: Server, tmp_path: Path) -> Iterator[Runner]:
    made = Runner(server, tmp_path)
    yield made
    made.kill()


def test_sigterm_finishes_running_jobs_and_a_restart_finishes_the_rest(
    server: Server, runner: Runner
) -> None:
    with server.client("producer") as producer:
        ids = [producer.enqueue("report.build", {"seconds": 2}).id for _ in range(10)]
        runner.start("--concurrency", "3", "--grace", "20")
        wait_until(lambda: len(runner.lines("start")) == 3, 30, "three handlers to start")
        signalled = time.monotonic()
        runner.signal(signal.SIGTERM)
        code, err = runner.wait(30)
        took = time.monotonic() - signalled
        assert code == 0, err
        assert runner.lines("end") == runner.lines("start")  # every started job finished
        counts = statuses(producer, ids)
        assert counts["running"] == 0  # nothing waits for a lease
        assert counts["completed"] == len(runner.lines("end"))
        assert all(producer.get(i).retry_count == 0 for i in ids)
        assert "worker stopped" in err and "completed" in err
        print(f"SIGTERM with 3 running: exited 0 after {took:.1f} s")

        runner.start("--concurrency", "3", "--grace", "20")
        wait_until(lambda: statuses(producer, ids)["completed"] == 10, 60, "every job")
        runner.signal(signal.SIGTERM)
        code, err = runner.wait(30)
        assert code == 0, err
        assert runner.lines("start") == collections.Counter(ids)  # each ran exactly once
        assert all(transitions(producer, i, "completed") == 1 for i in ids)


def test_a_second_signal_exits_at_once(server: Server, runner: Runner) -> None:
    with server.client("producer") as producer:
        producer.enqueue("report.build", {"seconds": 120})
        runner.start("--grace", "120")
        wait_until(lambda: len(runner.lines("start")) == 1, 30, "the handler to start")
        runner.signal(signal.SIGTERM)
        time.sleep(0.5)
        signalled = time.monotonic()
        runner.signal(signal.SIGINT)
        code, err = runner.wait(10)
    assert code == 128 + signal.SIGINT, err
    assert time.monotonic() - signalled < 10 and "exiting now" in err


def test_the_worker_carries_on_when_the_server_is_killed_and_restarted(
    server: Server, runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    with server.client("producer") as producer:
        ids = [
            job.id
            for job in producer.enqueue_many(
                [{"type": "report.build", "payload": {"seconds": 0.02}} for _ in range(300)]
            )
        ]
    runner.start("--concurrency", "8")
    wait_until(lambda: len(runner.lines("end")) >= 60, 60, "some jobs done")
    server.gunicorn.kill_9()
    time.sleep(1.0)
    port = server.gunicorn.port
    monkeypatch.setattr(tests.servers, "free_port", lambda: port)  # same address for the worker
    server.gunicorn.start()
    with server.client("producer") as producer:
        wait_until(lambda: statuses(producer, ids)["completed"] == 300, 120, "all 300 jobs")
        runner.signal(signal.SIGTERM)
        code, err = runner.wait(30)
        assert code == 0, err
        assert runner.lines("start") == collections.Counter(ids)  # no job ran twice
        assert all(transitions(producer, i, "completed") == 1 for i in ids)


def test_a_job_claimed_while_stopping_is_released_at_once(server: Server, runner: Runner) -> None:
    runner.start("--concurrency", "1")
    time.sleep(2.0)  # the worker is now in a long-poll claim (5 s) on an empty queue
    runner.signal(signal.SIGTERM)
    with server.client("producer") as producer:
        job = producer.enqueue("report.build", {"seconds": 0})  # wakes the waiting claim
        code, err = runner.wait(30)
        assert code == 0, err
        again = producer.get(job.id)
        assert again.status == "pending" and again.retry_count == 0 and not runner.lines("start")
        if "released unstarted" in err:  # the claim was still waiting when the job arrived
            assert [e.kind for e in producer.events(job.id)][-1] == "released"
