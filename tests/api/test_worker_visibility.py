"""A worker learns nothing about jobs it cannot see: complete, fail and heartbeat on another
worker's job answer the same 409 whatever that job's state (GET /jobs/{id} already says 404)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.api.conftest import assert_problem, snapshot
from tests.builders import Api

STATES = ("pending", "running", "cancelled", "completed", "failed")
BODIES = {"complete": {}, "fail": {"error": "x"}, "heartbeat": {"progress": 1}}


def _jobs_in_every_state(producer: Api, worker: Api, admin: Api) -> dict[str, int]:
    """One job per state, none of them ever held by ``other_worker``."""
    made: dict[str, int] = {}
    for state in ("running", "completed", "failed"):
        job = producer.enqueue(max_retries=0)
        claimed = worker.claim()
        assert claimed is not None and claimed["id"] == job["id"]
        if state != "running":
            action = "complete" if state == "completed" else "fail"
            done = worker.post(f"/jobs/{job['id']}/{action}", BODIES[action])
            assert done.get_json()["status"] == state
        made[state] = job["id"]
    made["pending"] = producer.enqueue(delay_seconds=3600)["id"]
    made["cancelled"] = producer.enqueue(delay_seconds=3600)["id"]
    assert admin.post(f"/jobs/{made['cancelled']}/cancel").get_json()["status"] == "cancelled"
    return made


def _anonymous(problem: dict[str, Any], job_id: int) -> dict[str, Any]:
    return {**problem, "detail": problem["detail"].replace(str(job_id), "N")}


@pytest.mark.parametrize("action", sorted(BODIES))
def test_worker_cannot_read_status_of_invisible_job(
    app: Flask, producer: Api, worker: Api, other_worker: Api, admin: Api, action: str
) -> None:
    made = _jobs_in_every_state(producer, worker, admin)
    before = snapshot(app)
    answers = []
    for state in STATES:
        job_id = made[state]
        assert_problem(other_worker.get(f"/jobs/{job_id}"), 404)
        problem = assert_problem(other_worker.post(f"/jobs/{job_id}/{action}", BODIES[action]), 409)
        assert not any(word in problem["detail"] for word in (*STATES, "stale")), problem
        answers.append(_anonymous(problem, job_id))
    assert all(answer == answers[0] for answer in answers), answers
    assert answers[0]["detail"] == "job N is not held by you"
    assert snapshot(app) == before
    # An id that does not exist is still a 404 (docs/architecture.md, "Who may do what": only
    # the holder's calls succeed, 409 for everyone else, 404 for ids that do not exist).
    assert_problem(other_worker.post(f"/jobs/424242/{action}", BODIES[action]), 404)
    # Admins see every job, and the worker its own: they keep the precise reasons.
    cancelled = made["cancelled"]
    assert (
        "cancelled"
        in assert_problem(admin.post(f"/jobs/{cancelled}/{action}", BODIES[action]), 409)["detail"]
    )
    mine = assert_problem(worker.post(f"/jobs/{made['completed']}/{action}", BODIES[action]), 409)
    assert "it is completed" in mine["detail"]
