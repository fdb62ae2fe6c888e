"""What the worker runner costs the server: one request per batch of finished jobs (their
outcomes and the claim of the next jobs together), outcomes reported while a claim waits, and
no request storm when the server refuses to let a claim wait. Requests are counted by the
server itself (``/metrics``), over every process."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import LEASE, Server, start_server, statuses, wait_until
from queuelog_client import JobContext, Worker
from test_worker import Running

pytestmark = pytest.mark.slow

# Every route a worker sends to: claims, finishes (with or without a claim), heartbeats, releases.
WORKER_ROUTES = ("/jobs/claim", "/jobs/finish", "/jobs/heartbeat", "/jobs/<id:job_id>/release")
STEADY_GOAL = 1.3  # requests per job in a steady stream, at most
JOBS = 240


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Server]:
    """Two server processes, as a deployment has: a claim waiting in one is woken by the other's
    commits, and the requests are counted over both."""
    yield from start_server(tmp_path, workers=2, LEASE_SECONDS=LEASE)


def worker_requests(server: Server) -> int:
    """The requests the server answered on the workers' routes so far."""
    counts = server.requests()
    return sum(counts[route] for route in WORKER_ROUTES)


def sleeping(most: float) -> Callable[[JobContext], None]:
    """A handler that works a random moment of up to ``most`` seconds: jobs end one by one."""

    def handler(ctx: JobContext) -> None:
        time.sleep(random.uniform(0, most))

    return handler


def _backlog(server: Server, concurrency: int, handler: Callable[[JobContext], Any]) -> float:
    """Requests per job to drain ``JOBS`` jobs enqueued beforehand."""
    with server.client("producer") as producer:
        ids = [job.id for job in producer.enqueue_many([{"type": "email.send"}] * JOBS)]
        return _drain(server, concurrency, handler, lambda: None, ids)


def _stream(server: Server, concurrency: int, handler: Callable[[JobContext], Any]) -> float:
    """Requests per job while two producers enqueue ``JOBS`` jobs one request each, as fast
    as the server takes them, and the worker keeps up with them."""
    ids: list[int] = []

    def produce() -> None:
        with server.client("producer", coalesce=False) as producer:
            ids.extend(producer.enqueue("email.send").id for _ in range(JOBS // 2))

    producers = [threading.Thread(target=produce) for _ in range(2)]

    def start() -> None:
        for thread in producers:
            thread.start()
        for thread in producers:
            thread.join(120)

    return _drain(server, concurrency, handler, start, ids)


def _one_at_a_time(server: Server, concurrency: int, handler: Callable[[JobContext], Any]) -> float:
    """Requests per job when a producer enqueues a job only once the last one finished."""
    ids: list[int] = []

    def produce() -> None:
        with server.client("producer") as producer:
            for _ in range(JOBS // 4):
                ids.append(producer.enqueue("email.send").id)
                assert producer.wait(ids[-1], 20).status == "completed"

    return _drain(server, concurrency, handler, produce, ids)


def _drain(
    server: Server,
    concurrency: int,
    handler: Callable[[JobContext], Any],
    produce: Callable[[], None],
    ids: list[int],
) -> float:
    before = worker_requests(server)
    with server.client("worker") as client, server.client("admin") as admin:
        running = Running(Worker(client, {"email.send": handler}, concurrency=concurrency))
        try:
            produce()
            wait_until(lambda: statuses(admin, ids)["completed"] == len(ids), 120, "every job")
        finally:
            running.stop()
    return (worker_requests(server) - before) / len(ids)


SHAPES = {
    # Two producers enqueue one job per request; 4 handler slots, jobs of up to 5 ms.
    "stream": (_stream, 4, sleeping(0.005)),
    # A backlog drained by 8 slots, jobs of up to 20 ms ending one by one.
    "backlog": (_backlog, 8, sleeping(0.02)),
    # A backlog drained one job at a time (one handler slot).
    "one-slot": (_backlog, 1, lambda ctx: None),
    # A trickle: the next job is enqueued once the last one is done.
    "trickle": (_one_at_a_time, 4, lambda ctx: None),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_runner_sends_about_one_request_per_batch_of_jobs(
    fresh_server: Server, shape: str
) -> None:
    """Claims, finishes and heartbeats together, counted by the server: at most
    ``STEADY_GOAL`` requests per job, however the jobs come."""
    run, concurrency, handler = SHAPES[shape]
    per_job = run(fresh_server, concurrency, handler)
    print(f"{shape}: {per_job:.2f} worker requests per job (concurrency {concurrency})")
    assert per_job <= STEADY_GOAL


def test_an_outcome_is_reported_while_the_next_claim_waits(fresh_server: Server) -> None:
    """The job outlives the runner's short linger, so its next claim is a long-poll on an empty
    queue when the handler returns: the outcome must not wait for that poll to end."""
    ended: dict[int, float] = {}

    def handler(ctx: JobContext) -> None:
        time.sleep(0.5)
        ended[ctx.id] = time.time()

    with fresh_server.client("producer") as producer, fresh_server.client("worker") as client:
        worker = Worker(client, {"email.send": handler}, concurrency=2, wait_seconds=10)
        running = Running(worker)
        try:
            job = producer.enqueue("email.send")
            done = producer.wait(job.id, 8)
        finally:
            running.stop()
    assert done.status == "completed" and done.finished_at is not None
    lag = done.finished_at.timestamp() - ended[job.id]
    print(f"outcome reported {lag * 1000:.0f} ms after the handler returned, during a long-poll")
    assert lag < 1.0


def test_a_claim_refused_its_wait_pauses_as_told(tmp_path: Any) -> None:
    """With one waiting claim per token and process, most of four workers sharing a token are
    refused their wait (``Retry-After``): they pause, rather than ask again at once."""
    servers = start_server(tmp_path, LONG_POLL_PER_TOKEN=1)
    server = next(servers)
    try:
        clients = [server.client("worker") for _ in range(4)]
        workers = [Worker(c, {"email.send": lambda ctx: None}, wait_seconds=2) for c in clients]
        before = worker_requests(server)
        running = [Running(worker) for worker in workers]
        try:
            time.sleep(4)
            sent = worker_requests(server) - before
            with server.client("producer") as producer:
                job = producer.enqueue("email.send")
                assert producer.wait(job.id, 10).status == "completed"  # still served
        finally:
            for each in running:
                each.stop()
            for client in clients:
                client.close()
    finally:
        servers.close()
    print(f"4 workers, 1 wait per token and process: {sent} requests in 4 s")
    assert sent < 40
