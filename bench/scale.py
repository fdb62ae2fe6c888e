"""Every page and list of every role at 10,000 and 1,000,000 jobs, through gunicorn, on SQLite
and (when its server binaries are installed) PostgreSQL; the lists also with a payload search
for the customer of a job the role sees (a key of PAYLOAD_SEARCH_KEYS), alone and with the
pending status.

The queue is loaded as ``bench.scale_load`` describes, then each page, list (with filters and
paging), job page, /metrics scrape and the claim is requested ``SAMPLES`` times, each size in
turn with the others (every size has its own server, all running at once). Goals: p95 at
the large size at most 100 ms, p50 at most twice the small size's (the claim: 1.2 times).
``BENCH_SCALE_SIZES=2000,50000`` runs it quickly at other sizes.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from flask import Flask

from app import create_app
from app.accounts import service as accounts
from app.accounts import store as accounts_store
from app.infra import db
from app.queue.contract.cursors import encode_cursor
from app.queue.usecases import listing
from app.queue.vocabulary.jobs import JobFilters
from app.queue.vocabulary.timeutil import utcnow
from bench import SECRET
from bench import scale_load as load
from bench.http_calls import wait_ready
from devservers.accounts import AS_OPERATOR
from devservers.keepalive import KeepAlive
from devservers.postgres import PostgresMissing, create_database, postgres_server
from devservers.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = 15
ROLES = {"admin": "admin", "producer": load.PRODUCERS[0], "worker": load.WORKERS[0]}
CLAIMER = load.WORKERS[1]
_CSRF = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')
Timings = dict[str, tuple[float, float]]
ORDERS = (
    "sort=created", "status=pending&sort=-priority", "status=pending&sort=run_at",
    "status=running&sort=-updated", "status=completed&sort=-updated",
)  # fmt: skip


class Session:
    """One keep-alive HTTP connection with a bearer token or a signed-in cookie."""

    def __init__(self, port: int) -> None:
        self.conn = KeepAlive("127.0.0.1", port, timeout=60)
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
        response, raw = self.conn.exchange(method, path, data, headers)
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
        form = f"csrf_token={match.group(1)}&username={name}&password={load.PASSWORD}"
        status, _ = self.call("POST", "/login", form)
        assert status == 302, f"sign-in as {name} answered {status}"
        return self

    def bearer(self, token: str) -> Session:
        self.headers["Authorization"] = f"Bearer {token}"
        return self


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p95 of millisecond samples."""
    samples = sorted(samples)
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


@contextmanager
def serve(url: str) -> Iterator[tuple[int, list[int]]]:
    """gunicorn on ``url`` with the settings of the other HTTP figures; yields the port and,
    once the block ends, the workers' resident memory (MB) in the list."""
    port = free_port()
    env = {**os.environ, "FLASK_SECRET_KEY": SECRET, "FLASK_DATABASE_URL": json.dumps(url)}
    command = [sys.executable, "-m", "gunicorn", "-w", "4", "-b", f"127.0.0.1:{port}"]
    command += ["--no-control-socket", "--log-level", "warning", "wsgi:app"]
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    rss: list[int] = []
    try:
        wait_ready(port, "/healthz")
        yield port, rss
        rss += worker_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=20)


def worker_rss_mb(master: int, field: str = "VmRSS") -> list[int]:
    """Resident memory of the server's worker processes, in MB (``VmHWM``: the most each has
    held since it started). Its workers are the children of any of its threads (granian starts
    them from one of its own)."""
    tasks = Path(f"/proc/{master}/task")
    children = [pid for task in tasks.glob("*") for pid in (task / "children").read_text().split()]
    sizes = []
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                sizes.append(int(line.split()[1]) // 1024)
    return sizes


def targets(app: Flask, size: int) -> dict[str, dict[str, str]]:
    """Per role, the ids its job pages and searches open (jobs it may see) and a cursor from
    the middle of the table."""
    found: dict[str, dict[str, str]] = {}
    with app.app_context(), db.read() as conn:
        for role, name in ROLES.items():
            user = accounts_store.user_by_name(conn, name)
            assert user is not None
            actor = user.actor()

            def first(status: str, actor: Any = actor) -> int:
                page = listing.page(conn, actor, JobFilters(status=status, limit=1))
                assert page.jobs, f"{actor.name} sees no {status} job"
                return page.jobs[0].id

            waiting = first("running" if role == "worker" else "pending")
            found[role] = {
                "waiting": str(waiting),
                "done": str(first("completed")),
                "cursor": encode_cursor("before", size // 2),
                "customer": quote(json.dumps({load.SEARCH_KEY: waiting % load.CUSTOMERS})),
            }
    return found


def probes(port: int, tokens: dict[str, str], ids: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Every page and list a role can open, the /metrics scrape and the claim, by name."""
    calls: dict[str, Callable[[], int]] = {}

    def add(name: str, session: Session, method: str, path: str) -> None:
        calls[name] = lambda: session.call(method, path)[0]

    for role, user in ROLES.items():
        page, api, mine = Session(port).sign_in(user), Session(port).bearer(tokens[user]), ids[role]
        filters = {  # label: query
            "": "", "?status=failed": "?status=failed", "?status=running": "?status=running",
            "?type=report.build": "?type=report.build", "?priority=high": "?priority=high",
            "?q=<done>": f"?q={mine['done']}", "?cursor=<middle>": f"?cursor={mine['cursor']}",
            "?payload=<customer>": f"?payload={mine['customer']}",
            "?status=pending&payload=<customer>": f"?status=pending&payload={mine['customer']}",
        }  # fmt: skip
        add(f"{role} /ui/", page, "GET", "/ui/")
        for label, query in filters.items():
            add(f"{role} /ui/jobs{label}", page, "GET", f"/ui/jobs{query}")
        for query in ORDERS:  # the page's other orders, each where an index keeps it
            add(f"{role} /ui/jobs?{query}", page, "GET", f"/ui/jobs?{query}")
        for which in ("waiting", "done"):
            add(f"{role} /ui/jobs/<{which}>", page, "GET", f"/ui/jobs/{mine[which]}")
        for label, query in filters.items():
            add(f"{role} GET /jobs{label}", api, "GET", f"/jobs{query}")
        add(f"{role} GET /jobs/<done>", api, "GET", f"/jobs/{mine['done']}")
        if role == "admin":
            for path in ("/ui/workers", "/ui/admin/audit", "/ui/schedules"):
                add(f"{role} {path}", page, "GET", path)
    add("monitor GET /metrics", Session(port).bearer(tokens[load.MONITOR]), "GET", "/metrics")
    add("worker POST /jobs/claim", Session(port).bearer(tokens[CLAIMER]), "POST", "/jobs/claim")
    return calls


def _schedules(port: int, token: str) -> None:
    """A few schedules for the schedules page."""
    admin = Session(port).bearer(token)
    for n, cron in enumerate(("*/5 * * * *", "0 2 * * *", "30 9 * * 1-5")):
        body = {"name": f"bench {n}", "cron": cron, "type": load.TYPES[n]}
        status, _ = admin.call("POST", "/schedules", body)
        assert status == 201, status


@dataclass
class Loaded:
    """A database loaded with one size of queue, and what its probes need."""

    url: str
    tokens: dict[str, str]
    ids: dict[str, dict[str, str]]


def load_queue(backend: str, url: str, size: int) -> Loaded:
    """Load ``size`` jobs into the empty database at ``url`` and upgrade it."""
    config = {"SECRET_KEY": SECRET, "DATABASE_URL": url, "PAYLOAD_SEARCH_KEYS": [load.SEARCH_KEY]}
    app = create_app(config)
    ids = load.prepare(app)
    started = time.perf_counter()
    if backend == "sqlite":
        load.load_sqlite(url.removeprefix("sqlite:///"), size, ids)
    else:
        load.load_postgresql(url.replace("+psycopg", ""), size, ids)
    load.analyze(app)
    loaded = time.perf_counter() - started
    upgraded = load.upgrade(app)
    load.analyze(app)
    caught_up = load.catch_up_metrics(app)
    print(
        f"  {backend}, {size:,} jobs: loaded in {loaded:.0f} s, upgrade to the latest revision "
        f"{upgraded:.1f} s, metric totals caught up in {caught_up:.0f} s"
    )
    with app.app_context(), db.transaction() as conn:
        names = (*ROLES.values(), CLAIMER, load.MONITOR)
        tokens = {
            n: accounts.create_token(conn, accounts.OPERATOR, n, now=utcnow(), origin=AS_OPERATOR)[
                1
            ]
            for n in names
        }
    seen = targets(app, size)
    db.engine(app).dispose()
    return Loaded(url, tokens, seen)


def measure(queues: dict[int, Loaded]) -> tuple[dict[int, Timings], dict[int, list[int]]]:
    """Serve every size at once and take the samples of each probe in turns, size after size,
    so a busy moment of the machine falls on all of them alike."""
    with ExitStack() as stack:
        served = {size: stack.enter_context(serve(queue.url)) for size, queue in queues.items()}
        calls = {}
        for size, (port, _) in served.items():
            _schedules(port, queues[size].tokens["admin"])
            calls[size] = probes(port, queues[size].tokens, queues[size].ids)
        results: dict[int, Timings] = {size: {} for size in queues}
        for name in calls[min(queues)]:
            samples: dict[int, list[float]] = {size: [] for size in queues}
            for size in queues:
                calls[size][name]()  # warm up
            for _ in range(SAMPLES):
                for size in queues:
                    started = time.perf_counter()
                    status = calls[size][name]()
                    samples[size].append((time.perf_counter() - started) * 1000)
                    assert status < 400, f"{name} answered {status}"
            for size in queues:
                results[size][name] = percentiles(samples[size])
    return results, {size: rss for size, (_, rss) in served.items()}


def report(backend: str, results: dict[int, Timings], rss: dict[int, list[int]]) -> None:
    """The scale table of one engine, with ratios and goals."""
    small, large = min(results), max(results)
    pad = " " * (len(backend) + 1)
    print(f"  {backend}: {'request':<42} {small:>9,} {large:>9,} {large:>9,}")
    print(f"  {pad} {'':<42} {'p50':>9} {'p50':>9} {'p95':>9}  ratio  goal")
    misses = 0
    for name, (p50_large, p95_large) in results[large].items():
        p50_small = results[small][name][0]
        ratio = p50_large / p50_small
        limit = 1.2 if name.endswith("/jobs/claim") else 2.0
        ok = p95_large <= 100 and ratio <= limit
        misses += not ok
        print(
            f"  {pad} {name:<42} {p50_small:>7.1f}ms {p50_large:>7.1f}ms "
            f"{p95_large:>7.1f}ms {ratio:6.2f}  {'ok' if ok else 'MISSED'}"
        )
    print(f"  {backend}: {len(results[large]) - misses} of {len(results[large])} within goals")
    for size, sizes in rss.items():
        mbs = ", ".join(f"{mb} MB" for mb in sizes)
        print(f"  {backend}: server RSS per worker after the run, {size:,} jobs: {mbs}")


def run_scale(base: Path) -> None:
    """The scale tables: SQLite, then PostgreSQL when a server can be started."""
    sizes = [int(n) for n in os.environ.get("BENCH_SCALE_SIZES", "10000,1000000").split(",")]
    queues = {}
    for size in sizes:
        path = base / f"sqlite-{size}" / "queuelog.sqlite3"
        path.parent.mkdir(parents=True)
        queues[size] = load_queue("sqlite", f"sqlite:///{path}", size)
    report("SQLite", *measure(queues))
    with ExitStack() as stack:
        try:
            server = stack.enter_context(postgres_server(durable=True))
        except PostgresMissing as exc:
            print(f"  PostgreSQL skipped: {exc}")
            return
        for size in sizes:
            url = create_database(server, f"scale_{size}")
            queues[size] = load_queue("postgresql", url, size)
        report("PostgreSQL", *measure(queues))
