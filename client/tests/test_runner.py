"""The ``queuelog-worker`` runner as a subprocess: signals, restarts, a server crash."""

from __future__ import annotations

import collections
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, statuses, transitions, wait_until

import devservers.servers
from devservers.sockets import wait_until_read_from

pytestmark = pytest.mark.slow

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


def test_the_runner_exits_1_when_the_server_refuses_its_token(
    server: Server, tmp_path: Path
) -> None:
    (tmp_path / "noop_handlers.py").write_text("HANDLERS = {'email.send': lambda ctx: None}\n")
    env = {**os.environ, "QUEUELOG_TOKEN": "revoked-or-never-issued"}
    argv = [sys.executable, "-m", "queuelog_client.cli", "noop_handlers:HANDLERS"]
    argv += ["--url", server.url]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "claim refused" in done.stderr and "worker stopped" in done.stderr


class Runner:
    """``queuelog-worker`` as a subprocess with a handlers module that logs each execution."""

    def __init__(self, fresh_server: Server, directory: Path) -> None:
        self.server = fresh_server
        self.directory = directory
        (directory / "sleepy_handlers.py").write_text(HANDLERS_MODULE)
        self.log = directory / "executions.log"
        self.log.touch()
        self.process: subprocess.Popen[str] | None = None
        self.logged = ""  # the worker's log lines read so far (by ``wait_for_log``)

    def start(self, *options: str, wrapper: tuple[str, ...] = ()) -> Runner:
        env = {**os.environ, "QUEUELOG_TOKEN": self.server.database.tokens["worker"]}
        env["HANDLER_LOG"] = str(self.log)
        argv = [sys.executable, "-m", "queuelog_client.cli", "sleepy_handlers:HANDLERS"]
        self.process = subprocess.Popen(
            [*wrapper, *argv, "--url", self.server.url, *options],
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

    def wait_for_log(self, text: str, timeout: float) -> None:
        """Read the worker's log until a line holds ``text``; fail after ``timeout`` seconds."""
        assert self.process is not None and self.process.stderr is not None
        pipe = self.process.stderr.fileno()  # read unbuffered: ``wait`` reads the rest
        deadline = time.monotonic() + timeout
        while text not in self.logged:
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"the worker never logged {text!r}: {self.logged}"
            chunk = os.read(pipe, 4096).decode()
            assert chunk, f"the worker exited before it logged {text!r}: {self.logged}"
            self.logged += chunk

    def wait(self, timeout: float) -> tuple[int, str]:
        assert self.process is not None
        _, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, self.logged + err

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.communicate(timeout=10)


@pytest.fixture
def runner(fresh_server: Server, tmp_path: Path) -> Iterator[Runner]:
    made = Runner(fresh_server, tmp_path)
    yield made
    made.kill()


def test_sigterm_finishes_running_jobs_and_a_restart_finishes_the_rest(
    fresh_server: Server, runner: Runner
) -> None:
    with fresh_server.client("producer") as producer:
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


def test_a_second_signal_exits_at_once(fresh_server: Server, runner: Runner) -> None:
    with fresh_server.client("producer") as producer:
        producer.enqueue("report.build", {"seconds": 120})
        runner.start("--grace", "120")
        wait_until(lambda: len(runner.lines("start")) == 1, 30, "the handler to start")
        runner.signal(signal.SIGTERM)
        runner.wait_for_log("SIGTERM: stopping", 60)  # the first is handled: the next is a second
        signalled = time.monotonic()
        runner.signal(signal.SIGINT)
        code, err = runner.wait(10)
    assert code == 128 + signal.SIGINT, err
    assert time.monotonic() - signalled < 10 and "exiting now" in err


def test_timeouts_doubled_sigterm_still_gives_the_grace(
    fresh_server: Server, runner: Runner
) -> None:
    """``timeout`` sends its SIGTERM to the worker and then to the whole process group: the
    worker gets it twice, and must take that as one stop, not as "exit now".

    The two ``kill`` calls are microseconds apart, so Python usually merges them into one call
    of the handler; ``strace`` on ``timeout`` (not on the worker) slows its system calls enough
    that the worker handles the first before the second arrives, every time. ``timeout``'s time
    runs out (its SIGALRM) once the handler runs, however long the worker took to start."""
    if shutil.which("strace") is None or shutil.which("timeout") is None:
        pytest.skip("needs strace and GNU timeout (Debian packages strace, coreutils)")
    with fresh_server.client("producer") as producer:
        job = producer.enqueue("report.build", {"seconds": 4})
        wrapper = ("strace", "-o", os.devnull, "timeout", "600")
        runner.start("--grace", "30", wrapper=wrapper)
        wait_until(lambda: runner.lines("start")[job.id] == 1, 60, "the handler to start")
        assert runner.process is not None
        (timeout,) = _children(runner.process.pid)  # strace's one child
        os.kill(timeout, signal.SIGALRM)
        code, err = runner.wait(30)
        assert code == 124, err  # timeout's own code: it did send its signal
        assert "exiting now" not in err and "SIGTERM: stopping" in err, err
        assert runner.lines("end")[job.id] == 1  # the handler got its grace and finished
        assert producer.get(job.id).status == "completed"


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_the_worker_carries_on_when_the_server_is_killed_and_restarted(
    fresh_server: Server, runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fresh_server.client("producer") as producer:
        ids = [
            job.id
            for job in producer.enqueue_many(
                [{"type": "report.build", "payload": {"seconds": 0.02}} for _ in range(300)]
            )
        ]
    runner.start("--concurrency", "8")
    wait_until(lambda: len(runner.lines("end")) >= 60, 60, "some jobs done")
    fresh_server.gunicorn.kill_9()
    time.sleep(1.0)
    port = fresh_server.gunicorn.port
    monkeypatch.setattr(
        devservers.servers, "free_port", lambda: port
    )  # same address for the worker
    fresh_server.gunicorn.start()
    with fresh_server.client("producer") as producer:
        wait_until(lambda: statuses(producer, ids)["completed"] == 300, 120, "all 300 jobs")
        runner.signal(signal.SIGTERM)
        code, err = runner.wait(30)
        assert code == 0, err
        assert runner.lines("start") == collections.Counter(ids)  # no job ran twice
        assert all(transitions(producer, i, "completed") == 1 for i in ids)


def test_a_job_claimed_while_stopping_is_released_at_once(
    fresh_server: Server, runner: Runner
) -> None:
    runner.start("--concurrency", "1")
    runner.wait_for_log("worker started", 60)  # its signal handlers are in place
    assert runner.process is not None
    wait_until_read_from(runner.process.pid, fresh_server.gunicorn.port, 60)  # its claim waits
    runner.signal(signal.SIGTERM)
    with fresh_server.client("producer") as producer:
        job = producer.enqueue("report.build", {"seconds": 0})  # wakes the waiting claim
        code, err = runner.wait(30)
        assert code == 0, err
        again = producer.get(job.id)
        assert again.status == "pending" and again.retry_count == 0 and not runner.lines("start")
        if not re.search(r"\b0 released unstarted", err):  # its claim's 5 s had not run out
            assert [e.kind for e in producer.events(job.id)][-1] == "released", err
