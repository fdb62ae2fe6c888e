"""Pages and lists at 10,000 and 1,000,000 jobs: p50/p95 per role through gunicorn.

The database is loaded the way a long-lived queue looks (70 % completed, 10 % failed, 18 %
pending, 2 % running, two events per job, two producers, four workers), then every page and
list a role uses is requested ``SAMPLES`` times over HTTP, with the claim alongside. The
figures that matter are the p95 at 1M (goal: 100 ms) and the ratio of p50 at 1M to p50 at 10k.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app import create_app, db, migrate
from app.accounts import service as accounts
from app.timeutil import utcnow

ROOT = Path(__file__).resolve().parent.parent
SECRET = "bench-secret-" + "x" * 40
SAMPLES = 15
PASSWORD = "bench-password-1234"
PRODUCERS = ("shop", "billing")
WORKERS = ("w1", "w2", "w3", "w4")
TYPES = ("email.send", "report.build", "webhook.deliver")
# status, share of all jobs
MIX = (("completed", 70), ("failed", 10), ("pending", 18), ("running", 2))
_CSRF = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


def _stamp(value: datetime) -> str:
    """How SQLAlchemy stores a naive UTC datetime in SQLite."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def prepare(path: Path) -> dict[str, int]:
    """Migrate ``path`` and create the users; returns their ids by name."""
    app = create_app({"SECRET_KEY": SECRET, "DATABASE_URL": f"sqlite:///{path}"})
    migrate.upgrade(app)
    ids = {}
    with app.app_context(), db.transaction() as conn:
        users = [("admin", "admin"), *((p, "producer") for p in PRODUCERS)]
        users += [(w, "worker") for w in WORKERS]
        for name, role in users:
            user = accounts.create_user(
                conn, accounts.OPERATOR, name, role, password=PASSWORD, now=utcnow()
            )
            ids[name] = user.id
    app.extensions["queuelog.db"].dispose()
    return ids


def load(path: Path, count: int, ids: dict[str, int]) -> None:
    """Bulk-insert ``count`` jobs in the mix above, with two events each, in one transaction."""
    rng = random.Random(7)
    now = datetime.now(UTC)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")  # loading only; the server runs with the default
    conn.execute("BEGIN")
    statuses = [status for status, share in MIX for _ in range(share)]
    job_rows: list[tuple[Any, ...]] = []
    event_rows: list[tuple[Any, ...]] = []
    for job_id in range(1, count + 1):
        status = statuses[job_id % 100]
        owner = ids[PRODUCERS[job_id % len(PRODUCERS)]]
        worker = WORKERS[job_id % len(WORKERS)]
        created = now - timedelta(seconds=(count - job_id) * 172_800 / count + 60)
        finished = created + timedelta(seconds=rng.uniform(1, 50))
        held = status != "pending"
        job_rows.append(
            (
                job_id,
                TYPES[job_id % len(TYPES)],
                '{"n": 1}',
                (job_id % 4) * 10,
                status,
                1 if status == "failed" else 0,
                3,
                1 if held else 0,
                f"key-{job_id}" if job_id % 10 == 0 else None,
                owner,
                _stamp(created),
                _stamp(created) if held else None,
                _stamp(now + timedelta(hours=6)) if status == "running" else None,
                300 if status == "running" else None,
                worker if held else None,
                '{"ok": true}' if status == "completed" else None,
                "boom" if status == "failed" else None,
                _stamp(created),
                _stamp(finished),
                _stamp(finished) if status in ("completed", "failed") else None,
            )
        )
        at = _stamp(created)
        if held:
            event_rows.append((job_id, at, "pending", "running", worker, 1, "claimed"))
        else:
            event_rows.append((job_id, at, None, "pending", PRODUCERS[0], None, "enqueued"))
        if status in ("completed", "failed"):
            event_rows.append((job_id, _stamp(finished), "running", status, worker, 1, status))
        else:
            event_rows.append((job_id, at, None, "pending", "admin", None, "enqueued"))
        if len(job_rows) >= 20_000:
            _flush(conn, job_rows, event_rows)
    _flush(conn, job_rows, event_rows)
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _flush(conn: sqlite3.Connection, jobs: list[Any], events: list[Any]) -> None:
    conn.executemany(
        "INSERT INTO jobs (id, type, payload, priority, status, retry_count, max_retries, "
        "attempts, idempotency_key, created_by, run_at, claimed_at, lease_expires_at, "
        "lease_seconds, worker_id, result, error, created_at, updated_at, finished_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        jobs,
    )
    conn.executemany(
        "INSERT INTO job_events (job_id, at, from_status, to_status, actor, attempt, kind) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        events,
    )
    jobs.clear()
    events.clear()


class Session:
    """One keep-alive HTTP connection with a bearer token or a signed-in cookie."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers: dict[str, str] = {}
        self.cookies: dict[str, str] = {}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        headers = dict(self.headers)
        data = None
        if isinstance(body, dict):
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        elif isinstance(body, str):
            data = body.encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        raw = response.read()
        for cookie in response.msg.get_all("Set-Cookie") or []:
            name, _, value = cookie.split(";", 1)[0].partition("=")
            self.cookies[name] = value
        if self.cookies:
            self.headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return response.status, raw

    def sign_in(self, name: str) -> Session:
        _, page = self.call("GET", "/login")
        match = _CSRF.search(page.decode())
        assert match, "no CSRF token on the login page"
        form = f"csrf_token={match.group(1)}&username={name}&password={PASSWORD}"
        status, _ = self.call("POST", "/login", form)
        assert status == 302, f"sign-in as {name} answered {status}"
        return self

    def bearer(self, token: str) -> Session:
        self.headers["Authorization"] = f"Bearer {token}"
        return self


def timings(call: Callable[[], int]) -> tuple[float, float]:
    """p50 and p95 in milliseconds of ``SAMPLES`` calls (after one warm-up call)."""
    call()
    samples = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        status = call()
        samples.append((time.perf_counter() - start) * 1000)
        assert status < 400, f"answered {status}"
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


@contextmanager
def serve(path: Path) -> Iterator[int]:
    """gunicorn on ``path`` with the production settings of the other HTTP figures."""
    from bench.__main__ import _wait_ready, free_port

    port = free_port()
    env = {
        **os.environ,
        "FLASK_SECRET_KEY": SECRET,
        "FLASK_DATABASE_URL": json.dumps(f"sqlite:///{path}"),
    }
    command = [sys.executable, "-m", "gunicorn", "-w", "4", "-b", f"127.0.0.1:{port}"]
    command += ["--no-control-socket", "--log-level", "warning", "wsgi:app"]
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    try:
        _wait_ready(port)
        yield port
    finally:
        print(f"    server RSS per worker: {worker_rss_mb(server.pid)}")
        server.terminate()
        server.wait(timeout=20)


def worker_rss_mb(master: int) -> str:
    """Resident memory of the server's worker processes, in MB."""
    children = Path(f"/proc/{master}/task/{master}/children")
    pids = children.read_text().split() if children.exists() else []
    sizes = []
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                sizes.append(int(line.split()[1]) // 1024)
    return ", ".join(f"{size} MB" for size in sizes) or "unknown"


def measure(port: int, tokens: dict[str, str]) -> dict[str, tuple[float, float]]:
    """p50/p95 of every page and list, per role."""
    admin, producer = Session(port).sign_in("admin"), Session(port).sign_in(PRODUCERS[0])
    worker_page = Session(port).sign_in(WORKERS[0])
    api = {name: Session(port).bearer(token) for name, token in tokens.items()}
    probes: dict[str, Callable[[], int]] = {}
    for role, session in (("admin", admin), ("producer", producer), ("worker", worker_page)):
        probes[f"{role} /ui/ dashboard"] = lambda s=session: s.call("GET", "/ui/")[0]
        probes[f"{role} /ui/jobs"] = lambda s=session: s.call("GET", "/ui/jobs")[0]
        probes[f"{role} /ui/jobs?status=failed"] = lambda s=session: s.call(
            "GET", "/ui/jobs?status=failed"
        )[0]
    probes["admin /ui/jobs/<id>"] = lambda: admin.call("GET", "/ui/jobs/10")[0]
    for name in ("admin", PRODUCERS[0], WORKERS[0]):
        session = api[name]
        probes[f"{name} GET /jobs"] = lambda s=session: s.call("GET", "/jobs")[0]
        probes[f"{name} GET /jobs?status=completed"] = lambda s=session: s.call(
            "GET", "/jobs?status=completed&limit=50"
        )[0]
    probes["w2 POST /jobs/claim"] = lambda: api["w2"].call("POST", "/jobs/claim")[0]
    return {name: timings(probe) for name, probe in probes.items()}


def run_scale(base: Path) -> None:
    """Print the scale table: 10k and 1M jobs on SQLite."""
    sizes = [int(n) for n in os.environ.get("BENCH_SCALE_SIZES", "10000,1000000").split(",")]
    results: dict[int, dict[str, tuple[float, float]]] = {}
    for size in sizes:
        path = base / f"scale-{size}" / "queuelog.sqlite3"
        path.parent.mkdir(parents=True)
        ids = prepare(path)
        started = time.perf_counter()
        load(path, size, ids)
        print(f"  loaded {size:,} jobs in {time.perf_counter() - started:.0f} s")
        app = create_app({"SECRET_KEY": SECRET, "DATABASE_URL": f"sqlite:///{path}"})
        with app.app_context(), db.transaction() as conn:
            tokens = {
                name: accounts.create_token(conn, accounts.OPERATOR, name, now=utcnow())[1]
                for name in ("admin", PRODUCERS[0], WORKERS[0], "w2")
            }
        app.extensions["queuelog.db"].dispose()
        with serve(path) as port:
            results[size] = measure(port, tokens)
    small, large = min(sizes), max(sizes)
    print(f"  {'request':<38} {'p50 small':>9} {'p50 large':>9} {'p95 large':>9}  ratio  goal")
    for name in results[large]:
        p50_small = results[small][name][0]
        p50_large, p95_large = results[large][name]
        goal = "ok" if p95_large <= 100 else "over 100 ms"
        print(
            f"  {name:<38} {p50_small:>7.1f}ms {p50_large:>7.1f}ms {p95_large:>7.1f}ms"
            f"  {p50_large / p50_small:5.2f}  {goal}"
        )
