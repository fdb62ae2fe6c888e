"""Claims under per-partition limits, with the clock in hand: each partition's rate window
counts its own claims and rolls over with the clock, the type's own limits hold beside the
partitions', priority still comes first, and a claim when no type has partition limits sends
not one statement more. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask

from app.queue.usecases import claiming
from app.queue.vocabulary.jobs import Job
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.harness import T0, Queue, make_queue
from tests.queue.rules.test_type_limits import change, claim_many, complete, enqueue_each
from tests.queue.sql.test_statement_counts import counted

LIMITS = {
    "report.build": {"max_running": 3, "partition_max_running": 2},
    "webhook.deliver": {"partition_rate_limit": "2/minute"},
}


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"JOB_TYPE_SETTINGS": LIMITS}


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)


def parts(jobs: list[Job]) -> Counter[str | None]:
    return Counter(job.partition for job in jobs)


def test_each_partitions_rate_window_rolls_over_with_the_clock(queue: Queue, backend: str) -> None:
    for name in ("a", "b"):
        enqueue_each(queue, 5, "webhook.deliver", partition=name)
    minute = T0.replace(second=0)
    assert parts(claim_many(queue, 3, now=minute + timedelta(seconds=5))) == {"a": 2, "b": 1}
    assert parts(claim_many(queue, 9, now=minute + timedelta(seconds=50))) == {"b": 1}
    assert claim_many(queue, 9, now=minute + timedelta(seconds=59.9)) == []
    assert parts(claim_many(queue, 9, now=minute + timedelta(seconds=60))) == {"a": 2, "b": 2}
    # a clock behind the window already counted gets nothing rather than a second window
    assert claim_many(queue, 9, now=minute + timedelta(seconds=30)) == []
    assert parts(claim_many(queue, 9, now=minute + timedelta(seconds=125))) == {"a": 1, "b": 1}


def test_the_types_own_max_running_holds_beside_the_partitions(queue: Queue, backend: str) -> None:
    for name in ("a", "b", "c"):
        enqueue_each(queue, 3, "report.build", partition=name)
    first = claim_many(queue, 100)
    assert len(first) == 3 and max(parts(first).values()) <= 2  # the type's 3, 2 a partition
    assert claim_many(queue, 100) == []
    complete(queue, first[0])
    (again,) = claim_many(queue, 100)
    assert parts([*first[1:], again])[again.partition] <= 2


def test_priority_still_comes_first(queue: Queue, backend: str) -> None:
    emails = enqueue_each(queue, 2, "email.send", priority="low", partition="z")
    urgent = queue.enqueue(type="report.build", priority="high", partition="a", actor=queue.admin)
    claimed = claim_many(queue, 1)
    assert [job.id for job in claimed] == [urgent.id]
    assert {job.id for job in claim_many(queue, 5)} == {job.id for job in emails}


def _claim_statements(queue: Queue, app: Flask) -> int:
    queue.enqueue(type="email.send", partition="p")
    with counted(app) as sent:
        assert len(claim_many(queue, 1, types=None)) == 1
    return len(sent)


@pytest.mark.parametrize("app_config", [{}])
def test_a_claim_without_partition_limits_sends_no_statement_more(
    queue: Queue, app: Flask, backend: str
) -> None:
    _claim_statements(queue, app)  # warm-up: the claim path's first tick and type poll
    plain = _claim_statements(queue, app)
    change(queue, "report.build", partition_max_running=5)
    assert _claim_statements(queue, app) > plain  # the limit's turn and counts
    change(queue, "report.build", partition_max_running=None)
    assert _claim_statements(queue, app) == plain


def test_a_partitioned_job_due_to_the_microsecond_is_claimed(queue: Queue, backend: str) -> None:
    job = queue.enqueue(type="email.send", partition="a")  # due at T0, a whole second
    claimed = queue.claim(now=T0)
    assert claimed is not None and claimed.id == job.id


def test_many_full_partitions_ahead_do_not_hide_one_with_room(queue: Queue, backend: str) -> None:
    for n in range(8):  # eight partitions, each with its window full and a backlog
        enqueue_each(queue, 3, "webhook.deliver", partition=f"p{n}")
    assert len(claim_many(queue, 100)) == 16
    # the turn stands at p7: p0 to p6, all full, come before p6z in the walk
    fresh = queue.enqueue(type="webhook.deliver", partition="p6z")
    assert [job.id for job in claim_many(queue, 1)] == [fresh.id]


def test_a_claim_held_back_by_a_full_window_says_when_it_opens(queue: Queue, backend: str) -> None:
    minute = T0.replace(second=0)
    enqueue_each(queue, 3, "webhook.deliver", partition="a")
    assert len(claim_many(queue, 5, now=minute + timedelta(seconds=10))) == 2
    with queue.tx() as conn:
        taken = claiming.claim_many(
            conn,
            queue.worker,
            now=minute + timedelta(seconds=20),
            settings=queue.settings,
            max_jobs=5,
        )
    assert taken.jobs == [] and taken.held_back_until == minute + timedelta(seconds=60)
