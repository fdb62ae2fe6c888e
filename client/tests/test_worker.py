"""The Worker in a thread against a real gunicorn server: batches, exactly-once, outcomes."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Server, start_server, statuses, transitions, wait_until
from cryptography.fernet import Fernet
from queuelog_client import Client, Fail, JobContext, Retry, Unauthorized, Worker

pytestmark = pytest.mark.slow


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


def test_a_refused_claim_stops_the_worker_with_the_error(server: Server) -> None:
    with Client(server.url, "revoked-or-never-issued") as client:
        worker = Worker(client, {"email.send": lambda ctx: None}, concurrency=2)
        with pytest.raises(Unauthorized):
            worker.run()  # in the test's main thread: signal handlers installed and restored
    assert worker.reporter.stats.completed == 0 and worker.abandoned == 0


def test_enqueue_many_sends_batches_and_keeps_the_order(fresh_server: Server) -> None:
    items = [{"type": "email.send", "payload": {"n": n}} for n in range(2500)]
    with fresh_server.client("producer") as producer:
        jobs = producer.enqueue_many(items)
        assert [j.payload["n"] for j in jobs] == list(range(2500))
        assert len({j.id for j in jobs}) == 2500
        keyed = [{**item, "idempotency_key": f"k{n}"} for n, item in enumerate(items[:10])]
        first, again = producer.enqueue_many(keyed), producer.enqueue_many(keyed)
        assert [j.id for j in first] == [j.id for j in again]


def test_a_thousand_jobs_with_eight_threads_complete_exactly_once(fresh_server: Server) -> None:
    executions: collections.Counter[int] = collections.Counter()
    lock = threading.Lock()

    def handler(ctx: JobContext) -> dict[str, Any]:
        with lock:
            executions[ctx.id] += 1
        return {"n": ctx.payload["n"]}

    with fresh_server.client("producer") as producer, fresh_server.client("worker") as client:
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


def test_the_handler_chooses_the_outcome_and_sees_progress_and_cancel(fresh_server: Server) -> None:
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
    with fresh_server.client("producer") as producer, fresh_server.client("admin") as admin:
        job = {
            k: producer.enqueue("email.send", {"kind": k}, max_retries=0 if k == "boom" else 3)
            for k in kinds
        }
        with fresh_server.client("worker") as client:
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


def test_an_outcome_the_server_refuses_holds_up_no_other(fresh_server: Server) -> None:
    """A result nested deeper than the server's MAX_JSON_DEPTH makes it refuse the whole
    request that carries it. The outcomes that went with it, and those after it, still arrive;
    that attempt fails with the refusal; the worker carries on claiming and heartbeating."""

    def handler(ctx: JobContext) -> dict[str, Any]:
        if ctx.payload.get("big"):
            deep: dict[str, Any] = {}
            for _ in range(40):
                deep = {"deeper": deep}
            return deep
        time.sleep(ctx.payload.get("seconds", 0))
        return {"n": ctx.payload["n"]}

    with fresh_server.client("producer") as producer, fresh_server.client("admin") as admin:
        with fresh_server.client("worker") as client:
            running = Running(Worker(client, {"email.send": handler}, concurrency=4))
            try:
                first = [producer.enqueue("email.send", {"n": n}).id for n in range(3)]
                big = producer.enqueue("email.send", {"big": True}, max_retries=0)
                wait_until(lambda: admin.get(big.id).status == "failed", 30, "the big one")
                beats = fresh_server.requests()["/jobs/heartbeat"]
                later = [producer.enqueue("email.send", {"n": n}).id for n in range(3, 9)]
                slow = producer.enqueue("email.send", {"n": 9, "seconds": 6}).id  # a beat in
                ids = [*first, *later, slow]
                wait_until(lambda: statuses(admin, ids)["completed"] == 10, 30, "the others")
                assert running.thread.is_alive()
            finally:
                running.stop()
        assert (admin.get(big.id).error or "").startswith("result ")  # the refusal, not a lease
        assert [admin.get(i).result for i in ids] == [{"n": n} for n in range(10)]
        assert fresh_server.requests()["/jobs/heartbeat"] > beats


def test_a_handler_reads_the_secrets_its_claim_carried(tmp_path: Path) -> None:
    """Secrets go in with ``enqueue(secrets=...)``, reach the handler as ``ctx.secrets``, and
    show up nowhere else: the producer's job names them, its repr hides them."""
    with contextlib.closing(
        start_server(tmp_path, SECRETS_KEY=Fernet.generate_key().decode())
    ) as servers:
        _handler_reads_secrets(next(servers))


def _handler_reads_secrets(server: Server) -> None:
    seen: list[dict[str, str]] = []

    def handler(ctx: JobContext) -> dict[str, Any]:
        seen.append(ctx.secrets)
        return {"signed_in": ctx.secrets.get("SMTP_PASSWORD") == "smtp-Pa55-client-test"}

    with server.client("producer") as producer, server.client("admin") as admin:
        job = producer.enqueue(
            "webhook.deliver", {}, secrets={"SMTP_PASSWORD": "smtp-Pa55-client-test"}
        )
        assert job.secret_names == ["SMTP_PASSWORD"] and job.secrets is None
        with server.client("worker") as client:
            running = Running(Worker(client, {"webhook.deliver": handler}, concurrency=1))
            try:
                wait_until(lambda: admin.get(job.id).status == "completed", 30, "completed")
            finally:
                running.stop()
        done = admin.get(job.id)
    assert seen == [{"SMTP_PASSWORD": "smtp-Pa55-client-test"}]
    assert done.result == {"signed_in": True} and done.secret_names == ["SMTP_PASSWORD"]
    claimed = dataclasses.replace(done, secrets={"K": "v-1"})
    assert claimed.secrets == {"K": "v-1"} and "v-1" not in repr(claimed)
