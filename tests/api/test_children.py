"""``POST /jobs/{id}/children``: the worker holding a job's attempt enqueues follow-up jobs as the
job's producer's jobs; anyone else is answered as a foreign finish is."""

from __future__ import annotations

from typing import Any

from flask import Flask

from app.accounts import service as accounts
from app.infra import db
from app.queue.vocabulary.models import Actor
from app.queue.vocabulary.states import Role
from tests.api.conftest import assert_problem, job_count, snapshot
from tests.builders import Api, make_api

ROOT = Actor(id=0, name="root", role=Role.ADMIN)


def _running(producer: Api, worker: Api, **fields: Any) -> dict[str, Any]:
    """A job of ``producer`` that ``worker`` holds now."""
    producer.enqueue(**fields)
    claimed = worker.claim()
    assert claimed is not None
    return claimed


def _spawn(caller: Api, job: dict[str, Any], jobs: Any, **body: Any) -> Any:
    body = {"attempt": job["attempt"], "jobs": jobs} | body
    return caller.post(f"/jobs/{job['id']}/children", body)


def test_children_belong_to_the_producer_and_name_their_parent(
    app: Flask, producer: Api, worker: Api
) -> None:
    parent = _running(producer, worker)
    response = _spawn(
        worker, parent, [{"type": "report.build", "payload": {"n": 1}}, {"type": "email.send"}]
    )
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert body["created"] == [True, True]
    assert [job["parent_id"] for job in body["jobs"]] == [parent["id"], parent["id"]]
    assert [job["type"] for job in body["jobs"]] == ["report.build", "email.send"]
    # The producer owns them: it sees them, and GET shows parent_id.
    child = producer.get(f"/jobs/{body['jobs'][0]['id']}").get_json()
    assert child["parent_id"] == parent["id"] and child["payload"] == {"n": 1}
    assert producer.get(f"/jobs/{parent['id']}").get_json()["parent_id"] is None
    # An idempotent resend (the worker retrying its request) replays: 200, nothing new.
    keyed = [{"type": "email.send", "idempotency_key": "child-1"}]
    assert _spawn(worker, parent, keyed).status_code == 201
    count = job_count(app)
    again = _spawn(worker, parent, keyed)
    assert again.status_code == 200 and again.get_json()["created"] == [False]
    assert job_count(app) == count


def test_the_producers_cap_applies(app: Flask, producer: Api, worker: Api) -> None:
    parent = _running(producer, worker)  # the producer's cap is medium
    before = snapshot(app)
    too_high = [{"type": "email.send"}, {"type": "email.send", "priority": "critical"}]
    body = assert_problem(_spawn(worker, parent, too_high), 403)
    assert "jobs[1]" in body["detail"]
    assert snapshot(app) == before
    assert _spawn(worker, parent, [{"type": "email.send", "priority": "medium"}]).status_code == 201


def test_anyone_but_the_holder_gets_what_a_foreign_finish_gets(
    app: Flask, client: Any, producer: Api, worker: Api, admin: Api
) -> None:
    other = make_api(app, client, "other-worker", "worker")
    parent = _running(producer, worker)
    item = [{"type": "email.send"}]
    before = snapshot(app)
    for caller, job in [
        (other, parent),  # a worker that does not hold it
        (admin, parent),  # admins too
        (worker, {**parent, "attempt": parent["attempt"] + 1}),  # a stale or future attempt
        (worker, {**parent, "id": 999_999}),  # no such job
    ]:
        spawned = _spawn(caller, job, item)
        finished = caller.post(
            f"/jobs/{job['id']}/complete", {"attempt": job["attempt"], "result": {}}
        )
        assert spawned.status_code == finished.status_code, spawned.get_json()
        assert spawned.status_code in (404, 409)
        assert spawned.get_json()["detail"] == finished.get_json()["detail"]
    assert_problem(_spawn(producer, parent, item), 403)  # producers may not work jobs
    assert snapshot(app) == before
    # Once finished, the job is no longer held: its worker is refused too.
    worker.post(f"/jobs/{parent['id']}/complete", {"attempt": parent["attempt"]})
    assert_problem(_spawn(worker, parent, item), 409)


def test_bad_bodies_are_refused_whole(app: Flask, producer: Api, worker: Api) -> None:
    parent = _running(producer, worker)
    before = snapshot(app)
    for bad, field in [
        ({"jobs": [{"type": "email.send"}]}, "attempt"),
        ({"attempt": parent["attempt"], "jobs": []}, "jobs"),
        ({"attempt": parent["attempt"], "jobs": [{"type": "email.send"}] * 101}, "jobs"),
        ({"attempt": parent["attempt"], "jobs": [{"type": "nope"}]}, "jobs[0].type"),
        ({"attempt": parent["attempt"], "jobs": [{}], "extra": 1}, "extra"),
    ]:
        body = assert_problem(worker.post(f"/jobs/{parent['id']}/children", bad), 422)
        assert field in body["errors"], body["errors"]
    assert snapshot(app) == before


def test_a_disabled_producer_gets_no_children(app: Flask, producer: Api, worker: Api) -> None:
    parent = _running(producer, worker)
    with app.app_context(), db.transaction() as conn:
        accounts.set_disabled(conn, ROOT, "producer", disabled=True)
    assert_problem(_spawn(worker, parent, [{"type": "email.send"}]), 403)
