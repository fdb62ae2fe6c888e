"""The JSON API through gunicorn, one figure per call, against a no-op Flask app served by the
same configuration (``gunicorn.conf.py``: its workers and threads) in the same run.

Each round starts the floor (``bench.noop_app``) and times a JSON GET and a JSON POST, then
starts queuelog on a fresh SQLite file and times each call in turn: enqueue, get, list, claim,
heartbeat, complete and fail (every call answered as the route promises, e.g. 201 or 200).
GETs are compared with the GET floor, POSTs with the POST floor. Each figure is the best of the
rounds; the load is ``CLIENTS`` keep-alive connections from one process.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.servers import REPO, Database, free_port, prepare_database, server_env

CLIENTS = 8
START_TIMEOUT = 30.0
Call = tuple[str, str, Any]  # method, path, JSON body (None: no body)
# The calls, in the order they run (claims need the enqueued jobs, the work calls the claims).
CALLS = ("POST /jobs", "GET /jobs/{id}", "GET /jobs", "POST /jobs/claim")
WORK = ("POST /jobs/{id}/heartbeat", "POST /jobs/{id}/complete", "POST /jobs/{id}/fail")


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
        _wait_ready(port, ready)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def _wait_ready(port: int, path: str) -> None:
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


def load(port: int, token: str | None, calls: Sequence[Call], expect: int) -> tuple[float, list]:
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


def floors(logs: Path, count: int) -> dict[str, float]:
    """The no-op app's JSON GET and POST, calls per second."""
    with gunicorn("bench.noop_app:app", dict(os.environ), "/noop", logs) as port:
        body = {"type": "email.send", "payload": {"n": 1}}
        get, _ = load(port, None, [("GET", "/noop", None)] * count, 200)
        post, _ = load(port, None, [("POST", "/noop", body)] * count, 200)
    return {"GET": get, "POST": post}


def calls(folder: Path, count: int) -> dict[str, float]:
    """Every API call of the job life, calls per second (``count`` of each; work calls on the
    claimed jobs: heartbeat each, then complete half and fail the other half)."""
    database: Database = prepare_database(folder, {"p": "producer", "w": "worker"})
    producer, worker = database.tokens["p"], database.tokens["w"]
    env = server_env(database)
    figures: dict[str, float] = {}
    with gunicorn("wsgi:app", env, "/healthz", folder) as port:
        enqueue = ("POST", "/jobs", {"type": "email.send", "payload": {"n": 1}})
        figures["POST /jobs"], jobs = load(port, producer, [enqueue] * count, 201)
        gets = [("GET", f"/jobs/{job['id']}", None) for job in jobs]
        figures["GET /jobs/{id}"], _ = load(port, producer, gets, 200)
        figures["GET /jobs"], _ = load(port, producer, [("GET", "/jobs", None)] * count, 200)
        claim = ("POST", "/jobs/claim", None)
        figures["POST /jobs/claim"], held = load(port, worker, [claim] * count, 200)
        beats = [_work(job, "heartbeat", {"progress": 50}) for job in held]
        figures["POST /jobs/{id}/heartbeat"], _ = load(port, worker, beats, 200)
        half = len(held) // 2
        done = [_work(job, "complete", {"result": {"ok": True}}) for job in held[:half]]
        figures["POST /jobs/{id}/complete"], _ = load(port, worker, done, 200)
        failed = [_work(job, "fail", {"error": "boom", "retryable": False}) for job in held[half:]]
        figures["POST /jobs/{id}/fail"], _ = load(port, worker, failed, 200)
    return figures


def _work(job: dict[str, Any], verb: str, body: dict[str, Any]) -> Call:
    return "POST", f"/jobs/{job['id']}/{verb}", {**body, "attempt": job["attempt"]}


def run(base: Path, rounds: int, count: int, report: Callable[..., None]) -> None:
    """Print one row per call with its ratio to the floor of its method."""
    best: dict[str, float] = {}
    for n in range(rounds):
        folder = Path(tempfile.mkdtemp(prefix=f"http{n}-", dir=base))
        for name, value in {**floors(folder, count), **calls(folder, count)}.items():
            best[name] = max(best.get(name, 0.0), value)
    print(
        f"HTTP through gunicorn -c gunicorn.conf.py ({_server_shape()}), {CLIENTS} keep-alive "
        f"connections, {count} calls per figure, best of {rounds} rounds:"
    )
    report("floor: no-op Flask JSON GET", best["GET"], best["GET"], "req/s")
    report("floor: no-op Flask JSON POST", best["POST"], best["POST"], "req/s")
    for name in CALLS + WORK:
        report(name, best[name], best[name.split()[0]], "req/s")


def _server_shape() -> str:
    workers = os.environ.get("WEB_CONCURRENCY", 2 * (os.cpu_count() or 1))
    return f"{workers} workers x {os.environ.get('QUEUELOG_THREADS', 32)} threads"
