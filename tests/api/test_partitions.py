"""The ``partition`` of a job on every enqueue path of the API (``POST /jobs``, batch items,
non-atomic batches, children, group callbacks), in the job's JSON, and ``GET /jobs?partition=``;
hostile partitions are refused per field and change nothing."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from app.queue.contract.job_responses import JobOut
from tests.api.conftest import assert_problem, job_row, snapshot
from tests.builders import Api

HOSTILE = [
    "",
    "a" * 65,
    "tenant 7",
    "tenant/7",
    "t\u00e9nant",  # unicode letter
    "\u0661\u0662",  # Arabic-Indic digits
    "a\n",
    "a\x00b",
    "'; DROP TABLE jobs; --",
    "x' OR '1'='1",
    "%",
    "*",
    7,
    True,
    ["a"],
    {"a": 1},
]


def test_a_job_keeps_its_partition_and_shows_it(producer: Api, app: Flask) -> None:
    job = producer.enqueue(partition="tenant-7.eu:a_1")
    JobOut.model_validate(job)
    assert job["partition"] == "tenant-7.eu:a_1"
    assert job_row(app, job["id"])["partition"] == "tenant-7.eu:a_1"
    assert producer.get(f"/jobs/{job['id']}").get_json()["partition"] == "tenant-7.eu:a_1"
    assert producer.enqueue(partition="a" * 64)["partition"] == "a" * 64
    plain = producer.enqueue()
    assert plain["partition"] is None and job_row(app, plain["id"])["partition"] is None


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_hostile_partition_is_refused_per_field(producer: Api, app: Flask, value: Any) -> None:
    before = snapshot(app)
    body = assert_problem(producer.post("/jobs", {"type": "email.send", "partition": value}), 422)
    assert list(body["errors"]) == ["partition"]
    batch = {"jobs": [{"type": "email.send"}, {"type": "email.send", "partition": value}]}
    body = assert_problem(producer.post("/jobs/batch", batch), 422)
    assert list(body["errors"]) == ["jobs[1].partition"]
    assert snapshot(app) == before


@pytest.mark.parametrize("value", [v for v in HOSTILE if isinstance(v, str)], ids=repr)
def test_a_hostile_partition_filter_is_refused(producer: Api, value: str) -> None:
    response = producer.get("/jobs", query_string={"partition": value})
    if value == "":  # an empty filter means "any", as for the other filters
        assert response.status_code == 200
        return
    assert list(assert_problem(response, 422)["errors"]) == ["partition"]


def test_the_list_filters_by_partition_within_what_the_caller_sees(
    producer: Api, other_producer: Api, admin: Api
) -> None:
    mine = producer.enqueue(partition="p1")
    producer.enqueue(partition="p2")
    producer.enqueue()
    theirs = other_producer.enqueue(partition="p1")
    report = producer.enqueue("report.build", partition="p1")

    def ids(api: Api, **query: str) -> list[int]:
        response = api.get("/jobs", query_string=query)
        assert response.status_code == 200, response.get_json()
        return [job["id"] for job in response.get_json()["jobs"]]

    assert ids(producer, partition="p1") == [report["id"], mine["id"]]
    assert ids(producer, partition="p1", type="email.send") == [mine["id"]]
    assert ids(producer, partition="p1", status="pending", priority="low") == [
        report["id"],
        mine["id"],
    ]
    assert ids(admin, partition="p1") == [report["id"], theirs["id"], mine["id"]]
    assert ids(producer, partition="nobody") == []


def test_batch_items_and_a_non_atomic_batch_take_partitions(producer: Api) -> None:
    items = [{"type": "email.send", "partition": "a"}, {"type": "email.send"}]
    response = producer.post("/jobs/batch", {"jobs": items})
    assert response.status_code == 201, response.get_json()
    assert [job["partition"] for job in response.get_json()["jobs"]] == ["a", None]
    each = [{"type": "email.send", "partition": "b"}, {"type": "email.send", "partition": "b c"}]
    response = producer.post("/jobs/batch", {"jobs": each, "atomic": False})
    assert response.status_code == 200, response.get_json()
    first, second = response.get_json()["results"]
    assert (first["status"], first["job"]["partition"]) == (201, "b")
    assert second["status"] == 422 and list(second["errors"]) == ["partition"]


def test_children_and_group_callbacks_take_partitions(producer: Api, worker: Api) -> None:
    producer.enqueue()
    parent = worker.claim()
    assert parent is not None
    body = {"attempt": parent["attempt"], "jobs": [{"type": "email.send", "partition": "kid"}]}
    response = worker.post(f"/jobs/{parent['id']}/children", body)
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["jobs"][0]["partition"] == "kid"
    bad = {"attempt": parent["attempt"], "jobs": [{"type": "email.send", "partition": "k id"}]}
    assert list(assert_problem(worker.post(f"/jobs/{parent['id']}/children", bad), 422)["errors"])
    callback = {"type": "email.send", "partition": "after"}
    batch = {"jobs": [{"type": "report.build"}], "group": {"name": "g", "on_complete": callback}}
    answer = producer.post("/jobs/batch", batch).get_json()
    member = worker.claim(types=["report.build"])
    assert member is not None
    worker.post(f"/jobs/{member['id']}/complete", {"attempt": member["attempt"]})
    group = producer.get(f"/groups/{answer['group_id']}").get_json()
    made = producer.get(f"/jobs/{group['callbacks']['on_complete']}").get_json()
    assert made["partition"] == "after"


def test_a_schedule_enqueues_its_jobs_in_its_partition(admin: Api, app: Flask) -> None:
    body = {"name": "hourly", "cron": "0 * * * *", "type": "email.send", "partition": "t-1"}
    before = snapshot(app)
    for bad in ("t 1", "a" * 65, 5):
        refused = assert_problem(admin.post("/schedules", body | {"partition": bad}), 422)
        assert list(refused["errors"]) == ["partition"]
    assert snapshot(app) == before
    created = admin.post("/schedules", body)
    assert created.status_code == 201, created.get_json()
    schedule = created.get_json()
    assert schedule["partition"] == "t-1"
    job = admin.post(f"/schedules/{schedule['id']}/run").get_json()
    assert job["partition"] == "t-1"
