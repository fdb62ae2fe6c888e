"""The JSON API through gunicorn, one figure per call, against a no-op Flask app served by the
same configuration (``gunicorn.conf.py``: its workers and threads) at the same time.

Both servers run side by side. Each round times, for every call in turn, a burst of the floor
(``bench.noop_app``: a JSON GET or a JSON POST, the call's method) and then a burst of the call
itself: enqueue, get, list, claim, heartbeat, complete and fail (every answer the one the route
promises, e.g. 201 or 200). A ratio is the median over the rounds of call rate / floor rate,
each pair measured seconds apart, so the load of a shared machine moves both; the rates shown
are the best of the rounds. The load is ``CLIENTS`` keep-alive connections from one process.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from devservers.servers import REPO, free_port, prepare_database, server_env

CLIENTS = 8
START_TIMEOUT = 30.0
Call = tuple[str, str, Any]  # method, path, JSON body (None: no body)
NAMES = (
    "POST /jobs",
    "GET /jobs/{id}",
    "GET /jobs",
    "POST /jobs/claim",
    "POST /jobs/{id}/heartbeat",
    "POST /jobs/{id}/complete",
    "POST /jobs/{id}/fail",
)
FLOOR_BODY = {"type": "email.send", "payload": {"n": 1}}


def floor_call(name: str) -> Call:
    """The no-op call of the same method as the call ``name`` ("POST /jobs")."""
    return ("GET", "/noop", None) if name.startswith("GET") else ("POST", "/noop", FLOOR_BODY)


@contextlib.contextmanager
def gunicorn(target: str, env: dict[str, str], ready: str, logs: Path) -> Iterator[int]:
    """``target`` served by gunicorn with the product's configuration; yields its port."""
    port = free_port()
    with (logs / f"{target.replace(':', '-')}-{port}.log").open("wb") as log:
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "gunicorn", "-c", str(REPO / "gunicorn.conf.py")),
                *("-b", f"127.0.0.1:{port}", "--log-level", "warning", target),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_ready(port, ready)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def wait_ready(port: int, path: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            conn.getresponse().read()
            conn.close()
            return
        time.sleep(0.1)
    raise RuntimeError(f"gunicorn on port {port} did not start")


def _send(conn: http.client.HTTPConnection, token: str | None, call: Call) -> tuple[int, bytes]:
    method, path, body = call
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def load(
    port: int, token: str | None, calls: Sequence[Call], expect: int
) -> tuple[float, list[Any]]:
    """Send every call once over ``CLIENTS`` connections; calls per second and the answers.
    An answer other than ``expect`` stops the bench: a figure must count only real work."""
    answers: list[Any] = [None] * len(calls)
    failures: list[str] = []

    def run(start: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for index in range(start, len(calls), CLIENTS):
            status, data = _send(conn, token, calls[index])
            if status != expect:
                failures.append(f"{calls[index][:2]} answered {status}: {data[:200]!r}")
                return
            answers[index] = json.loads(data)
        conn.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CLIENTS)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if failures:
        raise RuntimeError(failures[0])
    return len(calls) / elapsed, answers


def _work(job: dict[str, Any], verb: str, body: dict[str, Any]) -> Call:
    return "POST", f"/jobs/{job['id']}/{verb}", {**body, "attempt": job["attempt"]}


class Round:
    """One round: each call's burst right after a burst of the floor of its method. How a
    burst is made (through servers, in one process) is the subclass's ``pair``."""

    def __init__(self, tokens: dict[str, str], count: int) -> None:
        self.tokens, self.count = tokens, count
        self.rates: dict[str, tuple[float, float]] = {}  # call: (its rate, the floor's)

    def pair(self, name: str, token: str, calls: Sequence[Call], expect: int) -> list[Any]:
        """Time the floor of ``name``'s method, then ``calls``; returns their answers."""
        raise NotImplementedError

    def run(self) -> dict[str, tuple[float, float]]:
        """Every call of a job's life, ``count`` of each (work calls on the claimed jobs:
        heartbeat each, then complete half and fail the other half)."""
        count = self.count
        enqueue = ("POST", "/jobs", {"type": "email.send", "payload": {"n": 1}})
        jobs = self.pair("POST /jobs", "p", [enqueue] * count, 201)
        self.pair("GET /jobs/{id}", "p", [("GET", f"/jobs/{job['id']}", None) for job in jobs], 200)
        self.pair("GET /jobs", "p", [("GET", "/jobs", None)] * count, 200)
        held = self.pair("POST /jobs/claim", "w", [("POST", "/jobs/claim", None)] * count, 200)
        beats = [_work(job, "heartbeat", {"progress": 50}) for job in held]
        self.pair("POST /jobs/{id}/heartbeat", "w", beats, 200)
        half = len(held) // 2
        done = [_work(job, "complete", {"result": {"ok": True}}) for job in held[:half]]
        self.pair("POST /jobs/{id}/complete", "w", done, 200)
        failed = [_work(job, "fail", {"error": "boom", "retryable": False}) for job in held[half:]]
        self.pair("POST /jobs/{id}/fail", "w", failed, 200)
        return self.rates


class ServerRound(Round):
    """A round through the two gunicorn servers, on their ports."""

    def __init__(self, floor: int, queuelog: int, tokens: dict[str, str], count: int) -> None:
        super().__init__(tokens, count)
        self.floor, self.queuelog = floor, queuelog

    def pair(self, name: str, token: str, calls: Sequence[Call], expect: int) -> list[Any]:
        floor, _ = load(self.floor, None, [floor_call(name)] * len(calls), 200)
        rate, answers = load(self.queuelog, self.tokens[token], calls, expect)
        self.rates[name] = (rate, floor)
        return answers


def run(base: Path, rounds: int, count: int, report: Callable[..., None]) -> None:
    """Print one row per call: its best rate and its median ratio to the floor."""
    database = prepare_database(base / "db", {"p": "producer", "w": "worker"})
    measured: list[dict[str, tuple[float, float]]] = []
    with (
        gunicorn("bench.noop_app:app", dict(os.environ), "/noop", base) as floor,
        gunicorn("wsgi:app", server_env(database), "/healthz", base) as queuelog,
    ):
        for _ in range(rounds):
            measured.append(ServerRound(floor, queuelog, database.tokens, count).run())
    print(
        f"HTTP through gunicorn -c gunicorn.conf.py ({_server_shape()}), {CLIENTS} keep-alive "
        f"connections, {count} calls per burst, {rounds} rounds (floor = no-op Flask JSON "
        "GET/POST of the same method, served alongside):"
    )
    for method in ("GET", "POST"):
        floors = [m[name][1] for m in measured for name in NAMES if name.startswith(method)]
        report(f"floor: no-op Flask JSON {method} (best burst)", max(floors), max(floors), "req/s")
    for name in NAMES:
        ratio = statistics.median(m[name][0] / m[name][1] for m in measured)
        best = max(m[name][0] for m in measured)
        print(f"  {name:<52} {best:>10.0f} req/s   ratio  {ratio:5.2f} of floor (median)")


def _server_shape() -> str:
    workers = os.environ.get("WEB_CONCURRENCY", 2 * (os.cpu_count() or 1))
    return f"{workers} workers x {os.environ.get('QUEUELOG_THREADS', 32)} threads"
