"""Fair turns between partitions in the claim order: among due jobs of one priority, claims
serve partitions in turn (the one served least recently first, FIFO inside each); a claim of
several jobs takes one per partition before a second from any; priority still comes first."""

from __future__ import annotations

from typing import Any

from tests.builders import Api


def batch(producer: Api, *jobs: dict[str, Any]) -> list[dict[str, Any]]:
    response = producer.post("/jobs/batch", {"jobs": [{"type": "email.send", **j} for j in jobs]})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["jobs"]  # type: ignore[no-any-return]


def claim_all(worker: Api, count: int) -> list[dict[str, Any]]:
    claimed = [worker.claim() for _ in range(count)]
    assert all(job is not None for job in claimed)
    return claimed  # type: ignore[return-value]


def test_a_backlog_delays_other_partitions_by_one_turn_at_most(producer: Api, worker: Api) -> None:
    noisy = batch(producer, *[{"partition": "noisy"}] * 20)
    quiet = batch(producer, {"partition": "a"}, {"partition": "b"}, {}, {"partition": "c"})
    first = claim_all(worker, 5)
    assert {job["partition"] for job in first} == {"noisy", "a", "b", "c", None}
    assert sorted(job["id"] for job in first if job["partition"] != "noisy") == sorted(
        job["id"] for job in quiet
    )
    rest = claim_all(worker, 19)
    assert [job["id"] for job in first + rest if job["partition"] == "noisy"] == [
        job["id"] for job in noisy
    ]  # FIFO inside a partition
    assert worker.claim() is None


def test_the_partition_served_least_recently_goes_first(producer: Api, worker: Api) -> None:
    batch(producer, *[{"partition": "x"}] * 3, *[{"partition": "y"}] * 3)
    order = [job["partition"] for job in claim_all(worker, 6)]
    assert order == ["x", "y", "x", "y", "x", "y"]
    batch(producer, {"partition": "y"}, {"partition": "x"})
    # y was served last: x's turn comes first, though y's job is older
    assert [job["partition"] for job in claim_all(worker, 2)] == ["x", "y"]


def test_priority_comes_before_turns(producer: Api, worker: Api) -> None:
    batch(producer, {"partition": "a"}, {"partition": "b"})
    urgent = producer.enqueue(partition="a", priority="medium")
    assert worker.claim()["id"] == urgent["id"]  # type: ignore[index]


def test_a_claim_of_several_takes_one_per_partition_per_round(producer: Api, worker: Api) -> None:
    batch(producer, *[{"partition": "noisy"}] * 10, *[{"partition": "a"}] * 2, {})
    response = worker.post("/jobs/claim", {"max_jobs": 5})
    assert response.status_code == 200, response.get_json()
    partitions = [job["partition"] for job in response.get_json()["jobs"]]
    assert sorted(partitions[:3], key=str) == sorted(["noisy", "a", None], key=str)
    assert sorted(partitions[3:], key=str) == ["a", "noisy"]


def test_without_partitioned_jobs_the_claim_order_is_fifo(producer: Api, worker: Api) -> None:
    jobs = batch(producer, {}, {}, {})
    assert [job["id"] for job in claim_all(worker, 3)] == [job["id"] for job in jobs]
