"""The HTTP path measured from C: ``make serve``'s server (granian) beside plain gunicorn.

wrk drives the load, so the client does not eat the two cores it measures (a Python client
tops out near 450 requests/s on its own). Both servers run at once on one database and are
measured in turns, round after round, so a shared machine's load moves both alike; figures are
printed as ranges over the rounds. Measured:

* the floor: a no-op Flask JSON POST (``bench.noop_app``) under each server, 8 connections;
* ``POST /jobs`` with 1 and 8 connections (rate and p50), under each server;
* under attack, once per server: 160 sockets that send headers and one byte of a 100 KB body
  and then wait, and 140 long-polls of one token; ``/healthz`` and ``POST /jobs`` of another
  client, each on a new connection, 20 times: p50 and p99;
* after the attack, the resident memory of each app process.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.http_calls import wait_ready
from bench.scale import worker_rss_mb
from devservers.servers import (
    REPO,
    Client,
    http_request,
    prepare_database,
    send_on_new_sockets,
    server_env,
)

ROUNDS = 3
SECONDS = 5
ENQUEUE = '{"type": "email.send", "payload": {"n": 1}}'
SLOW_BODY = (
    b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\nu"
)
SERVERS = ("gunicorn", "make serve")
SETTLE = 3.0  # seconds between opening the attack and timing the other client
GIVE_UP = 2.0  # seconds an attacked request waits before it counts as unanswered


def command(server: str, target: str, port: int) -> list[str]:
    """The command line of ``server`` serving ``target`` ("module:object") on ``port``."""
    if server == "gunicorn":
        config = ("-c", str(REPO / "gunicorn.conf.py"), "--no-control-socket")
        return [sys.executable, "-m", "gunicorn", *config, "-b", f"127.0.0.1:{port}", target]
    return [sys.executable, str(REPO / "serve.py"), target]


@contextlib.contextmanager
def serving(server: str, target: str, env: dict[str, str], logs: Path) -> Iterator[tuple[int, int]]:
    """``target`` served by ``server`` with the product's settings; yields its port and the
    pid of its main process."""
    from devservers.servers import free_port

    port = free_port()
    env = {**env, "QUEUELOG_BIND": f"127.0.0.1:{port}"}
    log_path = logs / f"{server.replace(' ', '-')}-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command(server, target, port), cwd=REPO, env=env, stdout=log, stderr=log
        )
    try:
        wait_ready(port, "/healthz" if target.startswith(("wsgi", "rsgi")) else "/noop")
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


def wrk(url: str, connections: int, body: str, token: str | None, logs: Path) -> tuple[float, ...]:
    """POST ``body`` to ``url`` for ``SECONDS`` from ``connections`` connections: (requests/s,
    p50 ms, p99 ms). A non-2xx answer makes the figure void (wrk counts them)."""
    script = logs / "post.lua"
    auth = f'wrk.headers["Authorization"] = "Bearer {token}"\n' if token else ""
    script.write_text(
        f'wrk.method = "POST"\nwrk.body = {body!r}\n'
        f'wrk.headers["Content-Type"] = "application/json"\n{auth}'
    )
    threads = min(2, connections)
    load = (f"-t{threads}", f"-c{connections}", f"-d{SECONDS}s", "--latency", "-s", str(script))
    out = subprocess.run(
        ["wrk", *load, url],
        capture_output=True,
        text=True,
        check=True,
        timeout=SECONDS + 30,
    ).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw error answers on {url}:\n{out}")
    rate = float(_found(r"Requests/sec:\s+([\d.]+)", out)[1])
    return rate, _latency(out, "50%"), _latency(out, "99%")


def _latency(out: str, percentile: str) -> float:
    value, unit = _found(rf"{percentile}\s+([\d.]+)(us|ms|s)\b", out).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def under_attack(port: int, tokens: dict[str, str]) -> dict[str, list[float]]:
    """Milliseconds of 20 health checks and 20 enqueues of one client while slow bodies and
    one token's long-polls hold what they can."""
    claim = http_request("POST", "/jobs/claim", tokens["worker"], {"wait_seconds": 30})
    held = send_on_new_sockets(port, SLOW_BODY, 160) + send_on_new_sockets(port, claim, 140)
    timings: dict[str, list[float]] = {"GET /healthz": [], "POST /jobs": []}
    try:
        # Let the claims' first tries (a transaction each, 140 of them) pass: the figure is the
        # service while the attack holds, not while the claims queue for the database.
        time.sleep(SETTLE)
        for _ in range(20):
            for name, path in (("GET /healthz", "/healthz"), ("POST /jobs", "/jobs")):
                client = Client(f"127.0.0.1:{port}", tokens["producer"], timeout=GIVE_UP)
                started = time.perf_counter()
                try:
                    if path == "/healthz":
                        client.get(path)
                    else:
                        client.post(path, {"type": "email.send"})
                except OSError:
                    pass  # no answer within GIVE_UP: counted as the time it waited
                timings[name].append((time.perf_counter() - started) * 1000)
                client.close()
    finally:
        for sock in held:
            sock.close()
    return timings


def _range(values: list[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}"


def run(base: Path) -> None:
    """Every figure above, printed as ranges over ``ROUNDS`` rounds with the ratios asked of
    the HTTP path."""
    if shutil.which("wrk") is None:
        raise SystemExit("the wrk section needs wrk (Debian: apt-get install wrk)")
    logs = Path(tempfile.mkdtemp(prefix="wrk-", dir=base))
    database = prepare_database(base / "db", {"producer": "producer", "worker": "worker"})
    env = server_env(database)
    token = database.tokens["producer"]
    figures: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    with contextlib.ExitStack() as stack:
        served = {
            (server, kind): stack.enter_context(serving(server, target, env, logs))
            for server in SERVERS
            for kind, target in (
                (
                    "noop",
                    "bench.noop_app:app" if server == "gunicorn" else "bench.noop_app:rsgi_app",
                ),
                ("app", "wsgi:app" if server == "gunicorn" else "rsgi:app"),
            )
        }
        ports = {key: port for key, (port, _pid) in served.items()}
        for _ in range(ROUNDS):
            for server in SERVERS:
                floor = f"http://127.0.0.1:{ports[server, 'noop']}/noop"
                jobs = f"http://127.0.0.1:{ports[server, 'app']}/jobs"
                figures.setdefault((server, "floor"), []).append(wrk(floor, 8, ENQUEUE, None, logs))
                for connections in (1, 8):
                    figures.setdefault((server, f"jobs{connections}"), []).append(
                        wrk(jobs, connections, ENQUEUE, token, logs)
                    )
        attacked = {
            server: under_attack(ports[server, "app"], database.tokens) for server in SERVERS
        }
        memory = {server: worker_rss_mb(served[server, "app"][1]) for server in SERVERS}
    _print(figures, attacked, memory)


def _print(
    figures: dict[tuple[str, str], list[tuple[float, ...]]],
    attacked: dict[str, dict[str, list[float]]],
    memory: dict[str, list[int]],
) -> None:
    print(f"  wrk, 2 threads, {SECONDS} s per figure, {ROUNDS} rounds (ranges over the rounds)")
    print(f"  {'':<40} {'gunicorn':>18} {'make serve':>18}")
    rows = (
        ("no-op JSON POST, 8 conns, req/s", "floor", 0),
        ("POST /jobs, 1 conn, req/s", "jobs1", 0),
        ("POST /jobs, 8 conns, req/s", "jobs8", 0),
        ("POST /jobs, 1 conn, p50 ms", "jobs1", 1),
        ("POST /jobs, 8 conns, p50 ms", "jobs8", 1),
    )
    for label, key, column in rows:
        cells = [_range([f[column] for f in figures[server, key]]) for server in SERVERS]
        print(f"  {label:<40} {cells[0]:>18} {cells[1]:>18}")
    for name in ("GET /healthz", "POST /jobs"):
        cells = []
        for server in SERVERS:
            ms = sorted(attacked[server][name])
            cells.append(f"{statistics.median(ms):,.1f} / {ms[-1]:,.1f}")
        print(f"  {'attack: ' + name + ' p50 / p99 ms':<40} {cells[0]:>18} {cells[1]:>18}")
    cells = [", ".join(str(mb) for mb in sorted(memory[server])) for server in SERVERS]
    print(f"  {'after it, resident MB per app process':<40} {cells[0]:>18} {cells[1]:>18}")
    floor = [statistics.median(f[0] for f in figures[s, "floor"]) for s in SERVERS]
    print(f"  ratio: make serve floor / gunicorn floor (medians)   {floor[1] / floor[0]:5.2f}")
    for server in SERVERS:
        one = statistics.median(f[0] for f in figures[server, "jobs1"])
        eight = statistics.median(f[0] for f in figures[server, "jobs8"])
        p50_one = statistics.median(f[1] for f in figures[server, "jobs1"])
        p50_eight = statistics.median(f[1] for f in figures[server, "jobs8"])
        print(
            f"  {server}: POST /jobs rate 8 conns / 1 conn {eight / one:5.2f};"
            f" p50 8 conns / 1 conn {p50_eight / p50_one:5.2f}"
        )


def _found(pattern: str, out: str) -> re.Match[str]:
    """``pattern``'s match in wrk's report; a report without it stops the bench, saying why."""
    match = re.search(pattern, out)
    if match is None:
        raise RuntimeError(f"wrk's report has no {pattern!r}:\n{out}")
    return match
