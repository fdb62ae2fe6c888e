"""The ``partition`` option against a real server: a lone enqueue, enqueues coalesced from
threads into one batch, ``enqueue_many``, the list filter and a schedule's jobs."""

from __future__ import annotations

import threading
import uuid

import pytest
from conftest import Server
from queuelog_client import Client, Job, Unprocessable

pytestmark = pytest.mark.slow


def test_a_lone_enqueue_and_the_list_filter_carry_the_partition(producer: Client) -> None:
    partition = f"tenant-{uuid.uuid4().hex}"
    job = producer.enqueue("email.send", partition=partition)
    assert job.partition == partition and producer.get(job.id).partition == partition
    assert producer.enqueue("email.send").partition is None
    assert [found.id for found in producer.jobs(partition=partition)] == [job.id]
    with pytest.raises(Unprocessable) as refused:
        producer.enqueue("email.send", partition="not a partition")
    assert "partition" in refused.value.errors


def test_coalesced_and_batched_enqueues_carry_each_partition(server: Server) -> None:
    marker = uuid.uuid4().hex
    jobs: dict[int, Job] = {}
    with server.client("producer") as producer:
        start = threading.Barrier(8)

        def enqueue(n: int) -> None:
            start.wait()
            jobs[n] = producer.enqueue("email.send", partition=f"p{n % 3}-{marker}")

        threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert {n: job.partition for n, job in jobs.items()} == {
            n: f"p{n % 3}-{marker}" for n in range(8)
        }
        many = producer.enqueue_many(
            [{"type": "email.send", "partition": f"b-{marker}"}, {"type": "email.send"}]
        )
        assert [job.partition for job in many] == [f"b-{marker}", None]


def test_a_schedule_carries_the_partition_of_its_jobs(admin: Client) -> None:
    name = f"p-{uuid.uuid4().hex[:8]}"
    schedule = admin.create_schedule(name, "0 * * * *", "email.send", partition="nightly")
    try:
        assert schedule.partition == "nightly"
        job = admin.run_schedule(schedule.id)
        assert job.partition == "nightly"
    finally:
        admin.delete_schedule(schedule.id)
