"""Attacks on edit and retry (``POST /jobs/{id}/retry`` with a body) and run now (``POST
/jobs/{id}/run-now``): hostile bodies, sizes, types and ids answer 4xx, never 500, and change
nothing; another user's job answers as a job that does not exist."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.api.conftest import assert_problem, finish
from tests.api.test_edit_retry import everything
from tests.builders import Api

JSON = {"Content-Type": "application/json"}


def _failed(producer: Api, worker: Api) -> dict[str, Any]:
    job = producer.enqueue(max_retries=0)
    held = worker.claim()
    assert held is not None
    finish(worker, held, "failed")
    return job


RAW_BODIES = {
    "malformed JSON": (b'{"payload": {', JSON, 400),
    "duplicate keys": (b'{"priority": "low", "priority": "critical"}', JSON, 400),
    "NaN": (b'{"payload": {"n": NaN}}', JSON, 400),
    "a JSON array": (b"[]", JSON, 400),
    "too deep": (b'{"payload": ' + b'{"a": ' * 40 + b"1" + b"}" * 41, JSON, 400),
    "over a MiB": (b'{"payload": {"a": "' + b"x" * 1_100_000 + b'"}}', JSON, 413),
    "form-encoded": (b"priority=critical", {"Content-Type": "text/plain"}, 415),
    "lone surrogate": (b'{"reason": "\\ud800"}', JSON, 422),
}


@pytest.mark.parametrize(("raw", "headers", "status"), RAW_BODIES.values(), ids=RAW_BODIES)
@pytest.mark.parametrize("route", ["retry", "run-now"])
def test_hostile_raw_bodies_are_refused_and_change_nothing(
    app: Flask,
    producer: Api,
    worker: Api,
    admin: Api,
    route: str,
    raw: bytes,
    headers: dict[str, str],
    status: int,
) -> None:
    job = _failed(producer, worker) if route == "retry" else producer.enqueue(delay_seconds=600)
    before = everything(app)
    response = admin.post(f"/jobs/{job['id']}/{route}", data=raw, headers=headers)
    assert_problem(response, status)
    assert everything(app) == before


WRONG_TYPES = {
    "payload a number": {"payload": 5},
    "payload true": {"payload": True},
    "payload a 64 KiB object": {"payload": {"a": "x" * 65_536}},
    "payload deep inside the limit but wide": {"payload": {f"k{i}": i for i in range(20_000)}},
    "priority a list": {"priority": ["high"]},
    "priority in capitals": {"priority": "HIGH"},
    "max_retries a list": {"max_retries": [1]},
    "max_retries null": {"max_retries": None},
    "reason an object": {"reason": {"why": "x"}},
    "attempts": {"attempts": 0},
    "status": {"status": "completed"},
    "created_by": {"created_by": 1},
    "secrets null": {"secrets": None},
}


@pytest.mark.parametrize("body", WRONG_TYPES.values(), ids=WRONG_TYPES)
def test_wrong_types_and_forbidden_fields_are_422_and_change_nothing(
    app: Flask, producer: Api, worker: Api, admin: Api, body: dict[str, Any]
) -> None:
    job = _failed(producer, worker)
    before = everything(app)
    problem = assert_problem(admin.post(f"/jobs/{job['id']}/retry", body), 422)
    assert set(problem["errors"]) <= {*body, "body"}
    assert everything(app) == before


@pytest.mark.parametrize("route", ["retry", "run-now"])
@pytest.mark.parametrize("job_id", ["0", "99999999999999999999999", "-1", "1e3", "abc"])
def test_impossible_ids_are_404(admin: Api, route: str, job_id: str) -> None:
    body = {"priority": "high"} if route == "retry" else None
    assert admin.post(f"/jobs/{job_id}/{route}", body).status_code == 404


def test_another_producers_job_is_no_oracle(
    app: Flask, producer: Api, other_producer: Api, worker: Api
) -> None:
    """Waiting, running, finished or missing: another producer gets the same 404 and the
    same words (but the id), whatever state the job is in."""
    waiting = producer.enqueue(delay_seconds=600)
    running = producer.enqueue()
    assert worker.claim() is not None
    done = producer.enqueue(delay_seconds=0)
    before = everything(app)
    details = set()
    for job_id in (waiting["id"], running["id"], done["id"], 424242):
        problem = assert_problem(other_producer.post(f"/jobs/{job_id}/run-now"), 404)
        details.add(problem["detail"].replace(str(job_id), "N"))
        assert_problem(other_producer.post(f"/jobs/{job_id}/retry", {"priority": "low"}), 403)
    assert len(details) == 1
    assert everything(app) == before


def test_a_producer_cannot_raise_its_jobs_priority_by_an_edit(
    app: Flask, producer: Api, worker: Api
) -> None:
    job = _failed(producer, worker)
    before = everything(app)
    assert_problem(producer.post(f"/jobs/{job['id']}/retry", {"priority": "critical"}), 403)
    assert everything(app) == before
