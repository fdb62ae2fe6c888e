"""``POST /jobs/{id}/children``: the worker holding a job's attempt enqueues follow-up jobs as the
job's producer's jobs; anyone else is answered as a foreign finish is."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from app.accounts import service as accounts
from app.audit.actions import Origin
from app.infra import db
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import Role
from app.queue.vocabulary.timeutil import utcnow
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
        accounts.set_disabled(
            conn, ROOT, "producer", disabled=True, now=utcnow(), origin=Origin(ROOT.name)
        )
    assert_problem(_spawn(worker, parent, [{"type": "email.send"}]), 403)


# Children act as their producer only to create jobs (their keys live in the parent's
# namespace, their parents are the parent's family, and an answer carries no other job).


def _complete(worker: Api, job: dict[str, Any], result: dict[str, Any]) -> None:
    done = worker.post(f"/jobs/{job['id']}/complete", {"attempt": job["attempt"], "result": result})
    assert done.status_code == 200, done.get_json()


def test_a_childs_unique_key_never_answers_a_producers_job(producer: Api, worker: Api) -> None:
    hidden = {"type": "report.build", "unique_key": "nightly", "delay_seconds": 3600}
    theirs = producer.enqueue(**hidden, payload={"account": "private-payload"})
    parent = _running(producer, worker)
    response = _spawn(worker, parent, [{"type": "report.build", "unique_key": "nightly"}])
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert body["created"] == [True]
    (child,) = body["jobs"]
    assert child["id"] != theirs["id"] and child["parent_id"] == parent["id"]
    assert "private-payload" not in response.get_data(as_text=True)
    assert "duplicate" not in child


def test_a_childs_idempotency_key_never_replays_a_producers_job(
    producer: Api, worker: Api, other_worker: Api
) -> None:
    theirs = producer.enqueue(idempotency_key="shared-key", payload={"n": 1})
    claimed = other_worker.claim()
    assert claimed is not None and claimed["id"] == theirs["id"]
    _complete(other_worker, claimed, {"secret": "their-result"})
    parent = _running(producer, worker)
    item = {"type": "email.send", "payload": {"n": 1}, "idempotency_key": "shared-key"}
    response = _spawn(worker, parent, [item])
    assert response.status_code == 201, response.get_json()
    (child,) = response.get_json()["jobs"]
    assert child["id"] != theirs["id"] and child["parent_id"] == parent["id"]
    text = response.get_data(as_text=True)
    assert "their-result" not in text and "other-worker" not in text


def test_child_keys_are_no_oracle_of_the_producers_keys(producer: Api, worker: Api) -> None:
    producer.enqueue(idempotency_key="used-by-producer", payload={"n": 1})
    parent = _running(producer, worker)
    unused = {"type": "email.send", "payload": {"n": 2}, "idempotency_key": "never-used"}
    used = {**unused, "idempotency_key": "used-by-producer"}
    answers = [_spawn(worker, parent, [item]) for item in (unused, used)]
    assert [answer.status_code for answer in answers] == [201, 201]
    assert [answer.get_json()["created"] for answer in answers] == [[True], [True]]


def test_children_cannot_squat_the_producers_keys(producer: Api, worker: Api) -> None:
    parent = _running(producer, worker)
    squat = {"type": "report.build", "idempotency_key": "k", "unique_key": "u"}
    (child,) = _spawn(worker, parent, [squat]).get_json()["jobs"]
    # The producer's own enqueues with those keys are new jobs, not the worker's child, and
    # another request under the idempotency key is no "already used" either.
    keyed = producer.post("/jobs", {"type": "report.build", "idempotency_key": "k"})
    unique = producer.post("/jobs", {"type": "report.build", "unique_key": "u"})
    for response in (keyed, unique):
        assert response.status_code == 201, response.get_json()
        assert response.get_json()["id"] != child["id"]
        assert "duplicate" not in response.get_json()


def test_another_parents_children_have_their_own_keys(producer: Api, worker: Api) -> None:
    first = _running(producer, worker)
    second = _running(producer, worker)
    item = {"type": "report.build", "idempotency_key": "step-1", "unique_key": "step"}
    ids = []
    for parent in (first, second):
        response = _spawn(worker, parent, [item])
        assert response.status_code == 201 and response.get_json()["created"] == [True]
        ids.append(response.get_json()["jobs"][0]["id"])
    assert ids[0] != ids[1]


def test_childrens_parents_are_their_parent_and_its_children_only(
    app: Flask, producer: Api, other_producer: Api, worker: Api
) -> None:
    mine = producer.enqueue(delay_seconds=3600)
    theirs = other_producer.enqueue(delay_seconds=3600)
    parent = _running(producer, worker)
    cousin_parent = _running(producer, worker)
    (cousin,) = _spawn(worker, cousin_parent, [{"type": "email.send"}]).get_json()["jobs"]
    (sibling,) = _spawn(worker, parent, [{"type": "email.send"}]).get_json()["jobs"]
    before = snapshot(app)
    for outsider in (mine["id"], theirs["id"], cousin["id"], cousin_parent["id"], 10**9):
        response = _spawn(worker, parent, [{"type": "email.send", "depends_on": [outsider]}])
        body = assert_problem(response, 422)
        assert body["errors"] == {"jobs[0].depends_on": f"job {outsider} does not exist"}
    assert snapshot(app) == before
    family = {"type": "email.send", "depends_on": [parent["id"], sibling["id"]]}
    response = _spawn(worker, parent, [family])
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["jobs"][0]["waiting_for"] == [parent["id"], sibling["id"]]


def test_a_replayed_child_shows_what_its_enqueue_made_not_what_ran_since(
    app: Flask, client: Any, producer: Api, worker: Api, other_worker: Api
) -> None:
    runner = make_api(app, client, "child-runner", "worker")
    first = _running(producer, worker, job_type="report.build")
    item = {"type": "email.send", "payload": {"to": "a"}, "idempotency_key": "child-1"}
    made = _spawn(worker, first, [item]).get_json()["jobs"][0]
    # Another worker runs the child to the end; then the parent changes hands.
    held = runner.claim(types=["email.send"])
    assert held is not None and held["id"] == made["id"]
    beat = {"attempt": held["attempt"], "progress": 50, "message": "runner-progress"}
    assert runner.post(f"/jobs/{held['id']}/heartbeat", beat).status_code == 200
    _complete(runner, held, {"private": "child-result"})
    assert worker.post(f"/jobs/{first['id']}/release", {"attempt": 1}).status_code == 200
    second = other_worker.claim(types=["report.build"])
    assert second is not None and second["id"] == first["id"] and second["attempt"] == 2
    # Its new holder resends the same child: the same job, as its enqueue made it.
    replay = _spawn(other_worker, second, [item])
    assert replay.status_code == 200, replay.get_json()
    assert replay.get_json()["created"] == [False]
    (shown,) = replay.get_json()["jobs"]
    assert shown == made
    text = replay.get_data(as_text=True)
    for leak in ("child-result", "child-runner", "runner-progress"):
        assert leak not in text
    # The producer still sees what really happened.
    assert producer.get(f"/jobs/{made['id']}").get_json()["result"] == {"private": "child-result"}
    # The key is the parent's: another request under it is refused, as for any key.
    other = assert_problem(_spawn(other_worker, second, [{**item, "payload": {"to": "b"}}]), 422)
    assert other["errors"]["jobs[0].idempotency_key"] == "was already used with a different request"


class TestAtMostSoManyChildren:
    """MAX_CHILDREN_PER_JOB counts every child of a job, across requests and attempts."""

    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"MAX_CHILDREN_PER_JOB": 3}

    def test_a_job_spawns_at_most_max_children_in_all(
        self, app: Flask, producer: Api, worker: Api, other_worker: Api
    ) -> None:
        parent = _running(producer, worker, job_type="report.build")
        keyed = [{"type": "email.send", "idempotency_key": f"c{i}"} for i in range(2)]
        assert _spawn(worker, parent, keyed).status_code == 201
        before = snapshot(app)
        body = assert_problem(_spawn(worker, parent, [{"type": "email.send"}] * 2), 422)
        assert body["errors"] == {"jobs": "a job may spawn at most 3 children; this one has 2"}
        assert snapshot(app) == before
        # The next attempt, another worker's, counts the children of the ones before.
        assert worker.post(f"/jobs/{parent['id']}/release", {"attempt": 1}).status_code == 200
        again = other_worker.claim(types=["report.build"])
        assert again is not None and again["id"] == parent["id"]
        assert _spawn(other_worker, again, keyed).status_code == 200  # replays add nothing
        assert _spawn(other_worker, again, [{"type": "email.send"}]).status_code == 201
        assert_problem(_spawn(other_worker, again, [{"type": "email.send"}]), 422)
        assert _spawn(other_worker, again, keyed).status_code == 200  # still, at the limit
