"""Per-partition limits of a type (``partition_max_running``, ``partition_rate_limit``): set in
the configuration and by admins (``PATCH /types/{type}``: refused per field, admins only,
audited), shown by ``GET /types``, obeyed by claims in each partition on its own (the jobs
without a partition are one partition), a full partition never keeping a claim from the
others, and named by the explainer (``partition_limit``, which run-now refuses with 409). On
SQLite and PostgreSQL (tests/api/conftest)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text

from app.infra import db
from app.queue.contract.control_responses import ExplanationOut, TypeOut
from tests.api.conftest import assert_problem, finish, snapshot
from tests.api.test_edit_retry import everything
from tests.builders import Api

PER_PARTITION = 2


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {
        "JOB_TYPE_SETTINGS": {
            "report.build": {"partition_max_running": PER_PARTITION},
            "webhook.deliver": {"partition_rate_limit": "2/hour"},
        }
    }


def patch(api: Api, job_type: str, body: Any) -> Any:
    return api.client.patch(f"/types/{job_type}", json=body, headers=api.headers())


def claim(worker: Api, max_jobs: int, **fields: Any) -> list[dict[str, Any]]:
    response = worker.post("/jobs/claim", {"max_jobs": max_jobs, **fields})
    assert response.status_code in (200, 204), response.get_json()
    return response.get_json()["jobs"] if response.status_code == 200 else []


def partitions(jobs: list[dict[str, Any]]) -> Counter[str | None]:
    return Counter(job["partition"] for job in jobs)


def explain(api: Api, job_id: int) -> dict[str, dict[str, Any]]:
    body = api.get(f"/jobs/{job_id}/explain").get_json()
    ExplanationOut.model_validate(body)
    return {reason["code"]: reason for reason in body["reasons"]}


def test_types_show_the_configured_partition_limits_and_admins_override_them(
    admin: Api, app: Flask
) -> None:
    shown = {t["type"]: t for t in admin.get("/types").get_json()["types"]}
    assert shown["report.build"]["partition_max_running"] == PER_PARTITION
    assert shown["report.build"]["partition_rate_limit"] is None
    assert shown["webhook.deliver"]["partition_rate_limit"] == "2/hour"
    changed = patch(admin, "report.build", {"partition_max_running": 7})
    assert changed.status_code == 200
    TypeOut.model_validate(changed.get_json())
    assert changed.get_json()["partition_max_running"] == 7
    again = patch(admin, "email.send", {"partition_rate_limit": "5/minute"}).get_json()
    assert again["partition_rate_limit"] == "5/minute"
    cleared = patch(admin, "report.build", {"partition_max_running": None}).get_json()
    assert cleared["partition_max_running"] == PER_PARTITION  # the configuration again
    events = admin.get("/audit?action=type_change").get_json()["events"]
    assert [(e["target"], e["details"]) for e in events] == [
        ("type:report.build", {"partition_max_running": None}),
        ("type:email.send", {"partition_rate_limit": "5/minute"}),
        ("type:report.build", {"partition_max_running": 7}),
    ]


RUNNING_RULE = "must be an integer from 1 to 1,000,000, or null for no limit"
BAD = [
    {"partition_max_running": 0},
    {"partition_max_running": "2"},
    {"partition_max_running": True},
    {"partition_max_running": 1_000_001},
    {"partition_max_running": 1.5},
    {"partition_rate_limit": "0/second"},
    {"partition_rate_limit": "5/day"},
    {"partition_rate_limit": 5},
    {"partition_rate_limit": "5 / minute"},
]


@pytest.mark.parametrize("body", BAD, ids=lambda body: repr(body))
def test_bad_partition_limits_are_422_for_the_field_and_change_nothing(
    admin: Api, app: Flask, body: dict[str, Any]
) -> None:
    before = everything(app)
    problem = assert_problem(patch(admin, "email.send", body), 422)
    (field,) = body
    assert list(problem["errors"]) == [field]
    if field == "partition_max_running":
        assert problem["errors"][field] == RUNNING_RULE
    else:
        assert problem["errors"][field].startswith('must be "N/second", "N/minute" or "N/hour"')
    assert everything(app) == before


def test_only_admins_set_partition_limits(producer: Api, worker: Api, app: Flask) -> None:
    for caller in (producer, worker):
        assert_problem(patch(caller, "email.send", {"partition_max_running": 1}), 403)
    with db.read(app) as conn:
        assert conn.execute(text("SELECT count(*) FROM type_overrides")).scalar_one() == 0


def test_each_partition_runs_at_most_its_limit_and_a_full_one_blocks_no_other(
    producer: Api, worker: Api
) -> None:
    for _ in range(5):  # a backlog in "big" ahead of everything else
        producer.enqueue("report.build", partition="big")
    for name in ("a", "b"):
        for _ in range(3):
            producer.enqueue("report.build", partition=name)
    first = claim(worker, 100)
    assert partitions(first) == {"big": PER_PARTITION, "a": PER_PARTITION, "b": PER_PARTITION}
    assert claim(worker, 100) == []  # every partition is full
    producer.enqueue("report.build", partition="c")  # a new partition is served at once
    assert partitions(claim(worker, 1)) == {"c": 1}
    big = next(job for job in first if job["partition"] == "big")
    finish(worker, big)
    assert partitions(claim(worker, 100)) == {"big": 1}  # exactly the slot it freed


def test_the_jobs_without_a_partition_are_one_partition(producer: Api, worker: Api) -> None:
    for _ in range(4):
        producer.enqueue("report.build")
    producer.enqueue("report.build", partition="a")
    assert partitions(claim(worker, 100)) == {None: PER_PARTITION, "a": 1}
    assert claim(worker, 100) == []
    assert partitions(claim(worker, 100, types=["report.build"])) == {}


def test_other_types_are_not_held_by_a_full_partition(producer: Api, worker: Api) -> None:
    for _ in range(3):
        producer.enqueue("report.build", partition="a")
    producer.enqueue("email.send", partition="a")
    claimed = claim(worker, 100)
    assert Counter(job["type"] for job in claimed) == {"report.build": 2, "email.send": 1}


def test_single_claims_stop_at_the_limit_and_typed_claims_too(producer: Api, worker: Api) -> None:
    for _ in range(3):
        producer.enqueue("report.build", partition="a")
    assert worker.claim() is not None and worker.claim() is not None
    assert worker.claim() is None
    assert worker.claim(types=["report.build"]) is None


def test_each_partition_gets_its_rate_limit_of_claims(producer: Api, worker: Api) -> None:
    for name in ("a", "b"):
        for _ in range(3):
            producer.enqueue("webhook.deliver", partition=name)
    first = claim(worker, 100)
    assert partitions(first) == {"a": 2, "b": 2}
    for job in first:  # finishing frees no claim of the window
        finish(worker, job)
    assert claim(worker, 100) == []
    producer.enqueue("webhook.deliver")  # the partition null has its own window
    assert partitions(claim(worker, 100)) == {None: 1}


def test_the_explainer_names_the_partition_and_its_figures(
    app: Flask, producer: Api, worker: Api
) -> None:
    for _ in range(3):
        producer.enqueue("report.build", partition="acme")
    held = producer.enqueue("report.build", partition="acme")
    claim(worker, 100)
    reason = explain(producer, held["id"])["partition_limit"]
    assert reason["figures"] == {
        "type": "report.build", "partition": "acme", "partition_max_running": 2, "running": 2,
    }  # fmt: skip
    assert "partition acme" in reason["detail"] and "partition_max_running is 2" in reason["detail"]
    other = producer.enqueue("report.build", partition="other")
    assert "partition_limit" not in explain(producer, other["id"])


def test_the_explainer_names_a_full_rate_window(producer: Api, worker: Api) -> None:
    for _ in range(3):
        producer.enqueue("webhook.deliver")
    claim(worker, 100)
    (held,) = producer.get("/jobs?status=pending").get_json()["jobs"]
    reason = explain(producer, held["id"])["partition_limit"]
    assert reason["figures"]["partition"] is None
    assert reason["figures"]["partition_rate_limit"] == "2/hour"
    assert reason["figures"]["claims_in_window"] == 2
    assert reason["detail"].startswith("The partition null had its 2 claim(s)")


def test_run_now_is_409_when_the_partition_holds_the_job(
    app: Flask, producer: Api, worker: Api
) -> None:
    for _ in range(2):
        producer.enqueue("report.build", partition="acme")
    claim(worker, 100)
    job = producer.enqueue("report.build", partition="acme", delay_seconds=3600)
    before = snapshot(app), everything(app)
    assert (
        "partition acme"
        in assert_problem(producer.post(f"/jobs/{job['id']}/run-now"), 409)["detail"]
    )
    assert (snapshot(app), everything(app)) == before
    elsewhere = producer.enqueue("report.build", partition="elsewhere", delay_seconds=3600)
    assert producer.post(f"/jobs/{elsewhere['id']}/run-now").status_code == 200
