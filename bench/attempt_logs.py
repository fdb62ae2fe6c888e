"""What attempt logs cost the server (``make bench SECTION=logs``).

A producer enqueues jobs at a steady rate (``BENCH_LOGS_RATE`` jobs a second, default 500, one
batch every tenth of a second) and ``queuelog_client.Worker`` (8 slots) runs them; in one run
each handler writes 10 lines with ``ctx.log`` (carried by each job's outcome item: these
short jobs send no ``POST /jobs/{id}/logs``, and the figure counts any that is sent), in the
other none. The figure is the
server's CPU time per job (user + system of gunicorn's master and its 2 workers, from
``/proc``), the median of the rounds, with and without logs, and their ratio (goal: at most
1.2). The runs alternate, so a load change on the shared machine hits both.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path

from bench.server_counts import scrape
from devservers.servers import Gunicorn, prepare_database, running

ROUNDS = 3
SECONDS = 8  # of steady enqueueing per run
LINES = 10
GOAL = 1.2
USERS = {"producer": "producer", "worker": "worker", "monitor": "monitor"}
LOGS_ROUTE = "/jobs/<id:job_id>/logs"


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes ``pids`` used so far."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _run(server: Gunicorn, tokens: dict[str, str], rate: int, logs: bool) -> tuple[float, int]:
    """Server CPU seconds per job for one run, and the jobs it ran."""
    from queuelog_client import Client, JobContext, Worker

    def handler(ctx: JobContext) -> None:
        if logs:
            for n in range(LINES):
                ctx.log(f"step {n}: order {ctx.id} row {n * 17} processed, 3 rows updated")

    url = f"http://{server.host}"
    pids = [server.process.pid, *server.worker_pids()] if server.process else []
    with Client(url, tokens["worker"]) as worker_client, Client(url, tokens["producer"]) as prod:
        worker = Worker(worker_client, {"email.send": handler}, concurrency=8, wait_seconds=1)
        thread = threading.Thread(target=worker.run)
        thread.start()
        before = _cpu_seconds(pids)
        batch, ticks = rate // 10, SECONDS * 10
        start = time.monotonic()
        for tick in range(ticks):
            prod.enqueue_many([{"type": "email.send"}] * batch)
            time.sleep(max(0.0, start + (tick + 1) / 10 - time.monotonic()))
        jobs = batch * ticks
        deadline = time.monotonic() + 120
        while worker.reporter.stats.completed < jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        used = _cpu_seconds(pids) - before
        worker.stop()
        thread.join(60)
    return used / jobs, worker.reporter.stats.completed


def run(folder: Path) -> None:
    """Print the server's CPU per job with and without attempt logs, and their ratio."""
    rate = int(os.environ.get("BENCH_LOGS_RATE", "500"))
    database = prepare_database(folder / "db", USERS)
    figures: dict[bool, list[float]] = {False: [], True: []}
    with running(Gunicorn(database, folder, workers=2)) as server:
        _run(server, database.tokens, rate, logs=True)  # warm-up: imports, caches, tokens
        before = scrape(server.host, database.tokens["monitor"])
        for round_ in range(ROUNDS):
            for logs in (False, True) if round_ % 2 == 0 else (True, False):
                per_job, done = _run(server, database.tokens, rate, logs)
                figures[logs].append(per_job)
                print(
                    f"  round {round_ + 1}, {'10 lines' if logs else 'no logs '}: "
                    f"{per_job * 1e6:7.0f} µs server CPU per job ({done} jobs)"
                )
        counts = scrape(server.host, database.tokens["monitor"]) - before
    appends = sum(n for key, n in counts.items() if key[:2] == ("http", LOGS_ROUTE))
    plain, logged = (statistics.median(figures[k]) for k in (False, True))
    ratio = logged / plain
    verdict = "within" if ratio <= GOAL else "ABOVE"
    print(
        f"attempt logs, {rate} jobs/s, SQLite, gunicorn 2 workers: server CPU per job "
        f"{plain * 1e6:.0f} µs without logs, {logged * 1e6:.0f} µs with {LINES} lines a job "
        f"(x{ratio:.2f}, {verdict} the goal of x{GOAL}); {appends} log requests answered"
    )
