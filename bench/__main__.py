"""Measure queuelog against floors taken in the same run, on this machine, right now.

Each figure is printed with a ratio to a floor that does the least work the same path could
do, so a noisy shared machine moves both together:

* service enqueue and claim+complete, one transaction each, against raw ``sqlite3``
  statements with the same pragmas and the same commit per operation;
* claim latency at the head of a deep queue against the same claim on a shallow queue
  (index-served: the ratio should stay near 1);
* the HTTP API through gunicorn (4 workers, 8 client threads) against an unauthenticated
  request that stops at the token check (the WSGI stack without the database).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from app import create_app, db, migrate
from app.accounts import service as accounts
from app.queue import service
from app.queue.models import Actor
from app.queue.requests import EnqueueBody
from app.queue_settings import queue_settings
from app.schema import jobs
from app.timeutil import utcnow
from bench import e2e, pg
from bench.scale import run_scale

SECRET = "bench-secret-" + "x" * 40
ROOT = Path(__file__).resolve().parent.parent


def rate(count: int, seconds: float) -> float:
    """Operations per second."""
    return count / seconds if seconds > 0 else float("inf")


def timed(fn: Callable[[], int]) -> float:
    """Run ``fn`` (which returns how many operations it did) and return operations per second."""
    start = time.perf_counter()
    count = fn()
    return rate(count, time.perf_counter() - start)


def report(name: str, value: float, floor: float, unit: str = "ops/s") -> None:
    """Print one figure with its ratio to the floor."""
    print(f"  {name:<52} {value:>10.0f} {unit}   ratio {value / floor:5.2f} of floor")


def make_app(folder: Path, **config: Any) -> Any:
    app = create_app(
        {
            "SECRET_KEY": SECRET,
            "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}",
            **config,
        }
    )
    migrate.upgrade(app)
    return app


def floor_sqlite(path: Path, count: int) -> tuple[float, float]:
    """Raw sqlite3: insert rows, then claim-and-finish them, one commit per operation."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, status TEXT, priority INT, run_at TEXT, p TEXT)"
    )
    conn.execute("CREATE INDEX t_claim ON t (priority DESC, run_at, id) WHERE status='pending'")

    def insert() -> int:
        for _ in range(count):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO t (status, priority, run_at, p) VALUES ('pending', 0, ?, ?)",
                (time.time(), json.dumps({"n": 1})),
            )
            conn.execute("COMMIT")
        return count

    def claim_finish() -> int:
        for _ in range(count):
            conn.execute("BEGIN IMMEDIATE")
            (job_id,) = conn.execute(
                "UPDATE t SET status='running' WHERE id = (SELECT id FROM t WHERE "
                "status='pending' ORDER BY priority DESC, run_at, id LIMIT 1) RETURNING id"
            ).fetchone()
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "UPDATE t SET status='completed' WHERE id=? AND status='running'", (job_id,)
            )
            conn.execute("COMMIT")
        return count

    result = timed(insert), timed(claim_finish)
    conn.close()
    return result


def service_figures(app: Any, count: int) -> tuple[float, float]:
    """Enqueue then claim+complete through the service, one transaction per call."""
    with app.app_context():
        settings = queue_settings()
        with db.transaction() as conn:
            producer = accounts.create_user(conn, accounts.OPERATOR, "p", "producer", now=utcnow())
            worker = accounts.create_user(conn, accounts.OPERATOR, "w", "worker", now=utcnow())
        request = EnqueueBody.parse(
            {"type": "email.send", "payload": {"n": 1}}, settings
        ).to_request()

        def enqueue() -> int:
            for _ in range(count):
                with db.transaction() as conn:
                    service.enqueue(conn, producer.actor(), request, now=utcnow())
            return count

        def claim_complete() -> int:
            for _ in range(count):
                with db.transaction() as conn:
                    job = service.claim(conn, worker.actor(), now=utcnow(), settings=settings)
                assert job is not None
                with db.transaction() as conn:
                    service.complete(conn, worker.actor(), job.id, now=utcnow())
            return count

        return timed(enqueue), timed(claim_complete)


def load_queue(app: Any, depth: int) -> Actor:
    """Bulk-load ``depth`` due jobs of mixed priority; return an admin that may claim them."""
    with app.app_context():
        with db.transaction() as conn:
            user = accounts.create_user(conn, accounts.OPERATOR, "bulk", "admin", now=utcnow())
            now = utcnow()
            rows = [
                {
                    "type": "email.send",
                    "payload": {"n": i},
                    "priority": (i % 4) * 10,
                    "created_by": user.id,
                    "run_at": now,
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(depth)
            ]
            for start in range(0, depth, 5000):
                conn.execute(insert(jobs), rows[start : start + 5000])
        raw = db.engine().raw_connection()  # measure claims, not the bulk load's WAL
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raw.close()
    return user.actor()


def claim_rate(app: Any, actor: Actor, samples: int) -> float:
    """Claims per second at the head of the queue, one transaction each."""
    with app.app_context():
        settings = queue_settings()

        def claims() -> int:
            for _ in range(samples):
                with db.transaction() as conn:
                    assert service.claim(conn, actor, now=utcnow(), settings=settings)
            return samples

        return timed(claims)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_figures(folder: Path, seconds: float) -> tuple[float, float, float]:
    """Requests per second through gunicorn: floor (401), enqueue, claim+complete."""
    app = make_app(folder)
    with app.app_context(), db.transaction() as conn:
        for name, role in (("p", "producer"), ("w", "worker")):
            accounts.create_user(conn, accounts.OPERATOR, name, role, now=utcnow())
        _, producer = accounts.create_token(conn, accounts.OPERATOR, "p", now=utcnow())
        _, worker = accounts.create_token(conn, accounts.OPERATOR, "w", now=utcnow())
    app.extensions["queuelog.db"].dispose()
    port = free_port()
    env = {
        **os.environ,
        "FLASK_SECRET_KEY": SECRET,
        "FLASK_DATABASE_URL": json.dumps(f"sqlite:///{folder / 'bench.sqlite3'}"),
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-w",
            "4",
            "-b",
            f"127.0.0.1:{port}",
            "--no-control-socket",
            "--log-level",
            "warning",
            "wsgi:app",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        _wait_ready(port)
        floor = _load(port, seconds, lambda c: _call(c, "GET", "/jobs", None, None) == 401)
        enqueue = _load(
            port,
            seconds,
            lambda c: _call(c, "POST", "/jobs", producer, {"type": "email.send"}) == 201,
        )
        claim = _load(port, seconds, lambda c: _claim_complete(c, worker))
        return floor, enqueue, claim
    finally:
        server.terminate()
        server.wait(timeout=20)


def _wait_ready(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            if _call(conn, "GET", "/jobs", None, None) == 401:
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("gunicorn did not start")


def _call(
    conn: http.client.HTTPConnection, method: str, path: str, token: str | None, body: Any
) -> int:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    response = conn.getresponse()
    response.read()
    return response.status


def _claim_complete(conn: http.client.HTTPConnection, token: str) -> bool:
    headers = {"Authorization": f"Bearer {token}"}
    conn.request("POST", "/jobs/claim", headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.status == 204:
        return True
    job = json.loads(data)
    return _call(conn, "POST", f"/jobs/{job['id']}/complete", token, {}) == 200


def _load(
    port: int, seconds: float, call: Callable[[http.client.HTTPConnection], bool], clients: int = 8
) -> float:
    """Requests per second with ``clients`` threads calling for ``seconds``."""
    done = [0] * clients
    errors = [0] * clients
    stop = time.monotonic() + seconds

    def run(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < stop:
            if call(conn):
                done[index] += 1
            else:
                errors[index] += 1
        conn.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if sum(errors):
        print(f"  ({sum(errors)} unexpected answers)")
    return rate(sum(done), time.perf_counter() - start)


ROUNDS = 3  # each figure is the best of this many rounds, floors and figures interleaved


def best(rounds: list[tuple[float, ...]]) -> tuple[float, ...]:
    """The best (highest) value of each position over the rounds."""
    return tuple(max(values) for values in zip(*rounds, strict=True))


def service_section(base: Path) -> None:
    """Service layer, deep queue and HTTP figures against their floors."""
    count = int(os.environ.get("BENCH_OPS", "1000"))
    print(
        f"queuelog bench: {count} operations per figure, best of {ROUNDS} rounds, "
        "SQLite synchronous=FULL"
    )
    rounds = []
    for n in range(ROUNDS):
        (base / f"floor{n}").mkdir()
        floor = floor_sqlite(base / f"floor{n}" / "raw.sqlite3", count)
        rounds.append(floor + service_figures(make_app(base / f"svc{n}"), count))
    floor_insert, floor_claim, enqueue, claim = best(rounds)
    print("service layer vs raw sqlite3 (one commit per operation):")
    report("floor: raw INSERT", floor_insert, floor_insert)
    report("service.enqueue (with event row)", enqueue, floor_insert)
    report("floor: raw claim UPDATE + finish UPDATE", floor_claim, floor_claim)
    report("service.claim + service.complete (with events)", claim, floor_claim)
    print("claim at the head of the queue (index-served: ratio should stay near 1):")
    shallow_app, deep_app = make_app(base / "shallow"), make_app(base / "deep")
    shallow_actor, deep_actor = load_queue(shallow_app, 2_000), load_queue(deep_app, 200_000)
    shallow, deep = best(
        [
            (claim_rate(shallow_app, shallow_actor, 200), claim_rate(deep_app, deep_actor, 200))
            for _ in range(ROUNDS)
        ]
    )
    report("claims/s with 2,000 pending (floor)", shallow, shallow)
    report("claims/s with 200,000 pending", deep, shallow)
    print("HTTP through gunicorn (4 workers, 8 client threads):")
    floor_http, enqueue_http, claim_http = http_figures(base / "http", 5.0)
    report("floor: 401 at the token check", floor_http, floor_http, "req/s")
    report("POST /jobs", enqueue_http, floor_http, "req/s")
    report("POST /jobs/claim + complete (pairs)", claim_http, floor_http, "pairs/s")


def scale_section(base: Path) -> None:
    """Pages and lists at 10k and 1M jobs, per role."""
    print("pages and lists at scale (gunicorn -w 4; p50/p95 of 15 requests after one warm-up):")
    run_scale(base)


SECTIONS = {
    "service": service_section,
    "e2e": e2e.run,
    "pg": pg.run,
    "scale": scale_section,
}


def main(argv: list[str]) -> None:
    """Run the named sections (``python -m bench e2e``), or all of them."""
    unknown = [name for name in argv if name not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section {unknown}; choose from {', '.join(SECTIONS)}")
    base = Path(tempfile.mkdtemp(prefix="queuelog-bench-"))
    try:
        for name in argv or list(SECTIONS):
            (base / name).mkdir()
            SECTIONS[name](base / name)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
