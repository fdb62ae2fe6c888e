"""Dependencies and groups through the JSON API, on both engines: a job waits,
pending, until its parents finish, is cancelled when one fails (unless it asked to run), and a
group's callbacks are enqueued once its members have finished."""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from app.accounts import service as accounts
from app.audit.actions import Origin
from app.infra import db
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.states import Role
from app.queue.vocabulary.timeutil import utcnow
from tests.api.conftest import assert_problem, finish, job_count, snapshot
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import Api, make_api

ROOT = Actor(id=0, name="root", role=Role.ADMIN)


def _batch(api: Api, jobs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    response = api.post("/jobs/batch", {"jobs": jobs, **extra})
    assert response.status_code == 201, response.get_json()
    return response.get_json()  # type: ignore[no-any-return]


def _get(api: Api, job_id: int) -> dict[str, Any]:
    return api.get(f"/jobs/{job_id}").get_json()  # type: ignore[no-any-return]


def test_a_child_waits_until_its_parent_completes(producer: Api, worker: Api, backend: str) -> None:
    parent = producer.enqueue()
    child = producer.enqueue(depends_on=[parent["id"]])
    assert child["status"] == "pending"
    assert child["depends_on"] == [parent["id"]] and child["waiting_for"] == [parent["id"]]
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == parent["id"]
    assert worker.claim() is None  # the child is not handed out while its parent runs
    finish(worker, claimed)
    assert _get(producer, child["id"])["waiting_for"] == []
    again = worker.claim()
    assert again is not None and again["id"] == child["id"]


def test_a_failed_parent_cancels_its_children_unless_they_run_anyway(
    producer: Api, worker: Api, backend: str
) -> None:
    parent = producer.enqueue(max_retries=0)
    doomed = producer.enqueue(depends_on=[parent["id"]])
    grandchild = producer.enqueue(depends_on=[doomed["id"]])
    runs = producer.enqueue(depends_on=[parent["id"]], on_dependency_failure="run")
    finish(worker, worker.claim() or {}, "failed")
    assert _get(producer, doomed["id"])["status"] == "cancelled"
    assert _get(producer, grandchild["id"])["status"] == "cancelled"
    events = producer.get(f"/jobs/{doomed['id']}/events").get_json()["events"]
    assert (
        events[-1]["kind"] == "cancelled" and events[-1]["note"] == f"parent {parent['id']} failed"
    )
    cascade = producer.get(f"/jobs/{grandchild['id']}/events").get_json()["events"]
    assert cascade[-1]["note"] == f"parent {doomed['id']} was cancelled"
    assert _get(producer, runs["id"])["waiting_for"] == []
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == runs["id"]


def test_cancelling_a_parent_cancels_its_children(producer: Api, backend: str) -> None:
    parent = producer.enqueue()
    child = producer.enqueue(depends_on=[parent["id"]])
    assert producer.post(f"/jobs/{parent['id']}/cancel").status_code == 200
    assert _get(producer, child["id"])["status"] == "cancelled"


def test_a_graph_in_one_batch_runs_in_order(producer: Api, worker: Api, backend: str) -> None:
    answer = _batch(
        producer,
        [
            {"type": "email.send"},
            {"type": "email.send", "after_items": [0]},
            {"type": "email.send", "after_items": [0, 1]},
        ],
    )
    ids = [job["id"] for job in answer["jobs"]]
    assert [job["waiting_for"] for job in answer["jobs"]] == [[], [ids[0]], [ids[0], ids[1]]]
    order = []
    while (claimed := worker.claim()) is not None:
        order.append(claimed["id"])
        finish(worker, claimed)
    assert order == ids


def test_parents_the_caller_cannot_see_are_refused_as_missing(
    producer: Api, other_producer: Api, backend: str
) -> None:
    theirs = other_producer.enqueue()
    response = producer.post("/jobs", {"type": "email.send", "depends_on": [theirs["id"]]})
    assert response.status_code == 422
    assert response.get_json()["errors"] == {"depends_on": f"job {theirs['id']} does not exist"}
    batch = producer.post(
        "/jobs/batch",
        {"jobs": [{"type": "email.send"}, {"type": "email.send", "depends_on": [10**9]}]},
    )
    assert batch.status_code == 422
    assert batch.get_json()["errors"] == {"jobs[1].depends_on": f"job {10**9} does not exist"}
    assert producer.get("/jobs").get_json()["jobs"] == []  # nothing stored


def test_after_items_must_name_earlier_items(producer: Api, backend: str) -> None:
    response = producer.post("/jobs/batch", {"jobs": [{"type": "email.send", "after_items": [0]}]})
    assert response.status_code == 422
    assert response.get_json()["errors"] == {"jobs[0].after_items": "must name earlier items only"}


def test_a_child_of_a_finished_parent(producer: Api, worker: Api, backend: str) -> None:
    done = producer.enqueue()
    finish(worker, worker.claim() or {})
    broken = producer.enqueue(max_retries=0)
    finish(worker, worker.claim() or {}, "failed")
    ready = producer.enqueue(depends_on=[done["id"]])
    assert ready["waiting_for"] == [] and ready["status"] == "pending"
    cancelled = producer.enqueue(depends_on=[done["id"], broken["id"]])
    assert cancelled["status"] == "cancelled"
    runs = producer.enqueue(depends_on=[broken["id"]], on_dependency_failure="run")
    assert runs["status"] == "pending" and runs["waiting_for"] == []


def test_a_group_enqueues_its_callbacks_once(producer: Api, worker: Api, backend: str) -> None:
    answer = _batch(
        producer,
        [{"type": "email.send"}, {"type": "email.send"}],
        group={
            "name": "nightly",
            "on_complete": {"type": "email.send", "payload": {"done": True}},
            "on_success": {"type": "email.send", "payload": {"ok": True}},
        },
    )
    group_id = answer["group_id"]
    assert [job["group_id"] for job in answer["jobs"]] == [group_id, group_id]
    group = producer.get(f"/groups/{group_id}").get_json()
    assert group == {
        "id": group_id,
        "name": "nightly",
        "total": 2,
        "counts": {"pending": 2, "running": 0, "completed": 0, "failed": 0, "cancelled": 0},
        "finished": False,
        "callbacks": {"on_complete": None, "on_success": None},
        "callbacks_refused": {},
    }
    for _ in range(2):
        finish(worker, worker.claim() or {})
    group = producer.get(f"/groups/{group_id}").get_json()
    assert group["finished"] and group["counts"]["completed"] == 2
    callbacks = group["callbacks"]
    for which in ("on_complete", "on_success"):
        job = _get(producer, callbacks[which])
        assert job["group_id"] == group_id and job["status"] == "pending"
    assert group["total"] == 2  # callbacks are not members


def test_a_failed_member_skips_on_success(producer: Api, worker: Api, backend: str) -> None:
    answer = _batch(
        producer,
        [{"type": "email.send", "max_retries": 0}],
        group={
            "name": "g",
            "on_complete": {"type": "email.send"},
            "on_success": {"type": "email.send"},
        },
    )
    finish(worker, worker.claim() or {}, "failed")
    callbacks = producer.get(f"/groups/{answer['group_id']}").get_json()["callbacks"]
    assert callbacks["on_complete"] is not None and callbacks["on_success"] is None


def test_only_the_owner_and_admins_see_a_group(
    producer: Api, other_producer: Api, worker: Api, admin: Api, backend: str
) -> None:
    group_id = _batch(producer, [{"type": "email.send"}], group={"name": "mine"})["group_id"]
    assert admin.get(f"/groups/{group_id}").status_code == 200
    assert other_producer.get(f"/groups/{group_id}").status_code == 404
    assert worker.get(f"/groups/{group_id}").status_code == 404
    assert producer.get("/groups/999999").status_code == 404


def test_a_callback_names_no_parents_keys_or_secrets(producer: Api, backend: str) -> None:
    refused = {
        "depends_on": [1],
        "idempotency_key": "k",
        "unique_key": "u",
        "secrets": {"token": "s3cr3t-value"},
    }
    for name, value in refused.items():
        callback = {"type": "email.send", name: value}
        body = {"jobs": [{"type": "email.send"}], "group": {"name": "g", "on_success": callback}}
        response = producer.post("/jobs/batch", body)
        assert response.status_code == 422, (name, response.get_json())
        assert list(response.get_json()["errors"]) == [f"group.on_success.{name}"]
    assert producer.get("/jobs").get_json()["jobs"] == []  # nothing stored


# Dependencies name jobs that existed before the request: no self-waits, no cycles.


def _next_id(producer: Api) -> int:
    """The id the next job will get (ids are handed out in order)."""
    return int(producer.enqueue()["id"]) + 1


def test_a_job_cannot_wait_for_itself(app: Flask, producer: Api, backend: str) -> None:
    itself = _next_id(producer)
    before = snapshot(app)
    response = producer.post("/jobs", {"type": "email.send", "depends_on": [itself]})
    body = assert_problem(response, 422)
    assert body["errors"] == {"depends_on": f"job {itself} does not exist"}
    batch = producer.post("/jobs/batch", {"jobs": [{"type": "email.send", "depends_on": [itself]}]})
    assert assert_problem(batch, 422)["errors"] == {
        "jobs[0].depends_on": f"job {itself} does not exist"
    }
    assert snapshot(app) == before


def test_a_batch_cannot_write_a_cycle(app: Flask, producer: Api, backend: str) -> None:
    first = _next_id(producer)
    before = snapshot(app)
    cycle = [
        {"type": "email.send", "depends_on": [first + 1]},  # the next item's id
        {"type": "email.send", "after_items": [0]},
    ]
    body = assert_problem(producer.post("/jobs/batch", {"jobs": cycle}), 422)
    assert body["errors"] == {"jobs[0].depends_on": f"job {first + 1} does not exist"}
    assert snapshot(app) == before


# A group's callbacks are enqueued only if their producer may still enqueue them.


def _audit(admin: Api, action: str) -> list[dict[str, Any]]:
    events = admin.get(f"/audit?action={action}").get_json()["events"]
    return events  # type: ignore[no-any-return]


def _high_producer(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "high-producer", "producer", max_priority="high")


def test_a_disabled_producers_callbacks_are_refused(
    app: Flask, client: FlaskClient, worker: Api, admin: Api, backend: str
) -> None:
    producer = _high_producer(app, client)
    callback = {"type": "email.send", "priority": "high"}
    group = {"name": "g", "on_complete": callback, "on_success": callback}
    group_id = _batch(producer, [{"type": "report.build"}], group=group)["group_id"]
    with app.app_context(), db.transaction() as conn:
        accounts.set_disabled(
            conn, ROOT, "high-producer", disabled=True, now=utcnow(), origin=Origin(ROOT.name)
        )
    count = job_count(app)
    finish(worker, worker.claim() or {})
    assert job_count(app) == count  # neither callback was enqueued
    shown = admin.get(f"/groups/{group_id}").get_json()
    assert shown["finished"] and shown["callbacks"] == {"on_complete": None, "on_success": None}
    reason = "the group's producer may no longer enqueue jobs"
    assert shown["callbacks_refused"] == {"on_complete": reason, "on_success": reason}
    events = _audit(admin, "group_callback_refused")
    assert [(e["actor"], e["target"], e["details"]) for e in events] == [
        ("system:groups", f"group:{group_id}", {"callback": which, "reason": reason})
        for which in ("on_success", "on_complete")  # newest first
    ]


def test_a_callback_above_a_lowered_cap_is_refused(
    app: Flask, client: FlaskClient, worker: Api, admin: Api, backend: str
) -> None:
    producer = _high_producer(app, client)
    group = {
        "name": "g",
        "on_complete": {"type": "email.send", "priority": "high"},
        "on_success": {"type": "email.send", "priority": "low"},
    }
    group_id = _batch(producer, [{"type": "report.build"}], group=group)["group_id"]
    with app.app_context(), db.transaction() as conn:
        accounts.update_user(
            conn,
            ROOT,
            "high-producer",
            role="producer",
            max_priority="low",
            now=utcnow(),
            origin=Origin(ROOT.name),
        )
    finish(worker, worker.claim() or {})
    shown = producer.get(f"/groups/{group_id}").get_json()
    assert shown["callbacks"]["on_complete"] is None
    assert shown["callbacks_refused"] == {
        "on_complete": "priority high is above the producer's cap (low)"
    }
    low = producer.get(f"/jobs/{shown['callbacks']['on_success']}").get_json()
    assert low["priority"] == "low" and low["group_id"] == group_id  # within the cap: enqueued
    (event,) = _audit(admin, "group_callback_refused")
    assert event["details"]["callback"] == "on_complete"
