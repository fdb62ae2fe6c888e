"""``POST /jobs/batch`` with ``"atomic": false``: each item admitted on its own, answered as
``POST /jobs`` would answer it alone, a refused item undoing nothing."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api.conftest import assert_problem, event_rows, job_count
from tests.builders import Api, make_api

# The fields of a job that do not depend on who enqueued it or when.
SAME = ("type", "payload", "priority", "status", "idempotency_key", "depends_on", "waiting_for")


def _each(caller: Api, jobs: list[Any], **body: Any) -> list[dict[str, Any]]:
    response = caller.post("/jobs/batch", {"jobs": jobs, "atomic": False, **body})
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    assert list(answer) == ["results"] and len(answer["results"]) == len(jobs)
    return answer["results"]  # type: ignore[no-any-return]


def _alone(caller: Api, item: dict[str, Any]) -> dict[str, Any]:
    """What ``POST /jobs`` answers for ``item``, in the shape of a per-item answer."""
    response = caller.post("/jobs", item)
    body = response.get_json()
    if response.status_code >= 400:
        answer = {"status": response.status_code, "detail": body["detail"]}
        return answer | ({"errors": body["errors"]} if body.get("errors") else {})
    return {"status": response.status_code, "job": body}


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    if "job" not in answer:
        return answer
    job = answer["job"]
    return {"status": answer["status"], **{k: job[k] for k in SAME}, "dup": "duplicate" in job}


def _producers(app: Flask, client: FlaskClient) -> tuple[Api, Api]:
    """Two producers with the same cap and the same history: one job keyed ``old`` and one
    active job of the unique key ``u``."""
    callers = []
    for name in ("batching", "alone"):
        caller = make_api(app, client, name, "producer", max_priority="medium")
        caller.enqueue(idempotency_key="old", payload={"a": 1})
        caller.enqueue(unique_key="u")
        callers.append(caller)
    return callers[0], callers[1]


ITEMS = [
    {"type": "email.send", "payload": {"n": 0}},  # new: 201
    {"type": "email.send", "idempotency_key": "old", "payload": {"a": 1}},  # replay: 200
    {"type": "report.build", "idempotency_key": "old"},  # the key, another request: 422
    {"type": "email.send", "priority": "critical"},  # above the cap: 403
    {"type": "no.such.type", "bogus": 1},  # malformed: 422 keyed type and bogus
    {"type": "email.send", "depends_on": [10**9]},  # no such parent: 422 depends_on
    {"type": "email.send", "idempotency_key": "fresh", "payload": {"n": 7}},  # new: 201
    {"type": "email.send", "idempotency_key": "fresh", "payload": {"n": 7}},  # its replay: 200
    {"type": "email.send", "idempotency_key": "fresh", "payload": {"n": 8}},  # mismatch: 422
    {"type": "email.send", "payload": []},  # malformed payload: 422
    {"type": "email.send", "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 5},  # 422
]
UNIQUE = {"type": "email.send", "unique_key": "u"}  # the active job of its unique key: 200


@pytest.mark.parametrize("unique", [False, True], ids=["set-based", "with-unique-key"])
def test_each_item_is_answered_as_post_jobs_answers_it_alone(
    app: Flask, client: FlaskClient, unique: bool
) -> None:
    """The same items, from two producers with the same past: one sends them as a batch, the
    other one by one through ``POST /jobs``. A unique key sends the batch item by item."""
    batching, alone = _producers(app, client)
    items = [*ITEMS, UNIQUE] if unique else ITEMS
    answers = _each(batching, items)
    singles = [_alone(alone, item) for item in items]
    assert [_comparable(a) for a in answers] == [_comparable(s) for s in singles]
    statuses = [a["status"] for a in answers]
    assert statuses[:11] == [201, 200, 422, 403, 422, 422, 201, 200, 422, 422, 422]
    assert set(answers[4]["errors"]) == {"type", "bogus"}  # keyed as POST /jobs keys them
    assert answers[7]["job"]["id"] == answers[6]["job"]["id"]
    if unique:
        assert answers[11]["job"]["duplicate"] is True
    made = [a["job"]["id"] for a in answers if a["status"] == 201]
    for job_id in made:  # stored, each with its event, whatever was refused around it
        assert batching.get(f"/jobs/{job_id}").status_code == 200
        assert [e["kind"] for e in event_rows(app, job_id)] == ["enqueued"]
    assert job_count(app) == 2 * (2 + len(made))


def test_an_item_after_a_refused_item_is_refused_too(app: Flask, producer: Api) -> None:
    answers = _each(
        producer,
        [
            {"type": "email.send"},
            {"type": "no.such.type"},
            {"type": "email.send", "after_items": [0]},
            {"type": "email.send", "after_items": [0, 1]},  # waits for the refused item
            {"type": "email.send", "after_items": [3]},  # ... and so on down the chain
            {"type": "email.send", "after_items": [2]},
        ],
    )
    assert [a["status"] for a in answers] == [201, 422, 201, 422, 422, 201]
    assert answers[3]["errors"] == {
        "after_items": "item 1 was refused (422): this one cannot wait for it"
    }
    assert answers[4]["errors"] == {
        "after_items": "item 3 was refused (422): this one cannot wait for it"
    }
    first, second, last = (answers[i]["job"] for i in (0, 2, 5))
    assert second["waiting_for"] == [first["id"]] and last["waiting_for"] == [second["id"]]
    assert job_count(app) == 3


def test_after_items_that_name_later_items_are_that_items_422(producer: Api) -> None:
    answers = _each(
        producer,
        [
            {"type": "email.send", "after_items": [0]},
            {"type": "email.send", "depends_on": list(range(1, 81)), "after_items": [0] * 30},
            {"type": "email.send"},
        ],
    )
    assert [a["status"] for a in answers] == [422, 422, 201]
    assert answers[0]["errors"] == {"after_items": "must name earlier items only"}
    assert answers[1]["errors"] == {"depends_on": "at most 100 parents in all"}


def test_items_wait_for_the_parents_they_name(producer: Api, worker: Api) -> None:
    """An item naming a job it may see waits for it; one naming no such job is refused."""
    parent = producer.enqueue()
    answers = _each(
        producer,
        [
            {"type": "email.send", "depends_on": [parent["id"]]},
            {"type": "email.send", "depends_on": [parent["id"] + 10**6]},
        ],
    )
    assert [a["status"] for a in answers] == [201, 422]
    assert answers[0]["job"]["waiting_for"] == [parent["id"]]
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == parent["id"]  # the child waits
    assert worker.claim() is None


def test_group_needs_an_atomic_batch(app: Flask, producer: Api) -> None:
    body = {"jobs": [{"type": "email.send"}], "atomic": False, "group": {"name": "g"}}
    problem = assert_problem(producer.post("/jobs/batch", body), 422)
    assert problem["errors"] == {"group": 'requires "atomic": true'}
    assert job_count(app) == 0


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"jobs": [{"type": "email.send"}, 1], "atomic": False}, "jobs[1]"),
        ({"jobs": [], "atomic": False}, "jobs"),
        ({"jobs": [{"type": "email.send"}] * 1001, "atomic": False}, "jobs"),
        ({"jobs": [{"type": "email.send"}], "atomic": "no"}, "atomic"),
        ({"jobs": [{"type": "email.send"}], "atomic": 0}, "atomic"),
        ({"jobs": [{"type": "email.send"}], "atomic": False, "extra": 1}, "extra"),
    ],
)
def test_the_shape_of_the_batch_is_still_the_requests(
    app: Flask, producer: Api, body: dict[str, Any], key: str
) -> None:
    """Only an item's own fields are its own: a batch whose shape is wrong is refused whole."""
    problem = assert_problem(producer.post("/jobs/batch", body), 422)
    assert key in problem["errors"], problem["errors"]
    assert job_count(app) == 0


def test_an_explicit_atomic_true_is_the_all_or_nothing_batch(app: Flask, producer: Api) -> None:
    body = {"jobs": [{"type": "email.send"}, {"type": "nope"}], "atomic": True}
    assert "jobs[1].type" in assert_problem(producer.post("/jobs/batch", body), 422)["errors"]
    assert job_count(app) == 0


def test_workers_and_strangers_are_refused_the_whole_batch(
    app: Flask, worker: Api, anonymous: Api
) -> None:
    body = {"jobs": [{"type": "email.send"}], "atomic": False}
    assert_problem(worker.post("/jobs/batch", body), 403)
    assert_problem(anonymous.post("/jobs/batch", body), 401)
    assert job_count(app) == 0


def test_only_admins_see_the_error_field(producer: Api, admin: Api) -> None:
    body = {"jobs": [{"type": "email.send"}], "atomic": False}
    mine = producer.post("/jobs/batch", body).get_json()["results"][0]["job"]
    theirs = admin.post("/jobs/batch", body).get_json()["results"][0]["job"]
    assert "error" not in mine and theirs["error"] is None


def test_the_trace_context_reaches_every_item(producer: Api) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    response = producer.post(
        "/jobs/batch",
        {
            "jobs": [{"type": "email.send"}, {"type": "nope"}, {"type": "report.build"}],
            "atomic": False,
        },
        headers={"traceparent": traceparent},
    )
    results = response.get_json()["results"]
    assert [r["job"]["trace"]["traceparent"] for r in results if "job" in r] == [traceparent] * 2
