"""Attacks on ``POST /jobs/batch`` with ``"atomic": false``: groups, caps, keys repeated in one
batch, parents of another producer, ``after_items``, the batch limit and hostile items. Each
item must be answered as ``POST /jobs`` would answer it, and no request may produce a 500."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api.conftest import assert_problem, job_count, snapshot
from tests.api.test_batch_each import _alone, _comparable, _each
from tests.builders import Api, make_api


@pytest.mark.parametrize("group", [{}, {"name": "g"}, {"name": "g", "on_complete": {}}])
def test_a_group_in_a_per_item_batch_is_refused_whole(
    app: Flask, producer: Api, group: dict[str, Any]
) -> None:
    body = {"jobs": [{"type": "email.send"}], "atomic": False, "group": group}
    assert assert_problem(producer.post("/jobs/batch", body), 422)["errors"] == {
        "group": 'requires "atomic": true'
    }
    assert job_count(app) == 0


def test_group_null_is_no_group(producer: Api) -> None:
    answers = _each(producer, [{"type": "email.send"}], group=None)
    assert [a["status"] for a in answers] == [201] and answers[0]["job"].get("group_id") is None


def test_only_the_item_above_the_cap_is_403(app: Flask, producer: Api) -> None:
    items = [{"type": "email.send", "priority": p} for p in ("low", "critical", "medium", "high")]
    answers = _each(producer, items)
    assert [a["status"] for a in answers] == [201, 403, 201, 403]
    assert answers[1] == {"status": 403, "detail": "priority is above your cap"}
    assert job_count(app) == 2


@pytest.mark.parametrize("unique", [False, True], ids=["set-based", "with-unique-key"])
def test_a_key_refused_with_its_first_item_is_free_for_the_next(
    app: Flask, client: FlaskClient, unique: bool
) -> None:
    """The first item with key ``k`` is refused (above the cap, a parent that does not exist):
    nothing took the key, so the next item with ``k`` is new (201), and its repeats replay it
    (200) or, with another request, are 422; as one ``POST /jobs`` after another would."""
    extra = {"unique_key": "u"} if unique else {}
    items = [
        {"type": "email.send", "idempotency_key": "k", "priority": "critical"},
        {"type": "email.send", "idempotency_key": "k", "depends_on": [10**9]},
        {"type": "email.send", "idempotency_key": "k", "payload": {"n": 1}, **extra},
        {"type": "email.send", "idempotency_key": "k", "payload": {"n": 1}, **extra},
        {"type": "email.send", "idempotency_key": "k", "payload": {"n": 2}, **extra},
    ]
    batching = make_api(app, client, "batching", "producer")
    alone = make_api(app, client, "alone", "producer")
    answers = _each(batching, items)
    singles = [_alone(alone, item) for item in items]
    assert [_comparable(a) for a in answers] == [_comparable(s) for s in singles]
    assert [a["status"] for a in answers] == [403, 422, 201, 200, 422]
    assert answers[3]["job"]["id"] == answers[2]["job"]["id"]
    assert job_count(app) == 2


def test_another_producers_parent_is_refused_as_if_it_did_not_exist(
    producer: Api, other_producer: Api
) -> None:
    """No oracle: the answer for another producer's job is the answer for no job at all."""
    theirs = other_producer.enqueue()
    missing = theirs["id"] + 10**6
    answers = _each(
        producer,
        [
            {"type": "email.send", "depends_on": [theirs["id"]]},
            {"type": "email.send", "depends_on": [missing]},
            {"type": "email.send"},
        ],
    )
    assert [a["status"] for a in answers] == [422, 422, 201]
    assert answers[0]["errors"] == {"depends_on": f"job {theirs['id']} does not exist"}
    assert answers[1]["errors"] == {"depends_on": f"job {missing} does not exist"}
    assert answers[0]["detail"].replace(str(theirs["id"]), "N") == answers[1]["detail"].replace(
        str(missing), "N"
    )


def test_after_items_wait_for_the_job_an_earlier_item_was_answered_with(
    producer: Api, worker: Api
) -> None:
    """``after_items`` names an earlier item; when that item replayed an existing job (its
    idempotency key, a repeated key in the batch, or a unique key's active job), the item
    waits for that job, as ``depends_on`` naming it would."""
    old = producer.enqueue(idempotency_key="old")
    active = producer.enqueue(unique_key="u")
    answers = _each(
        producer,
        [
            {"type": "email.send", "idempotency_key": "old"},  # replays ``old``
            {"type": "email.send", "after_items": [0]},
            {"type": "email.send", "idempotency_key": "new"},
            {"type": "email.send", "idempotency_key": "new"},  # replays item 2
            {"type": "email.send", "after_items": [3]},
            {"type": "email.send", "unique_key": "u"},  # the active job of ``u``
            {"type": "email.send", "after_items": [5, 1]},
        ],
    )
    assert [a["status"] for a in answers] == [200, 201, 201, 200, 201, 200, 201]
    new = answers[2]["job"]["id"]
    assert answers[1]["job"]["waiting_for"] == [old["id"]]
    assert answers[4]["job"]["waiting_for"] == [new]
    assert answers[6]["job"]["waiting_for"] == sorted([active["id"], answers[1]["job"]["id"]])


def test_an_item_cannot_wait_for_itself_or_a_later_item(app: Flask, producer: Api) -> None:
    answers = _each(
        producer,
        [
            {"type": "email.send", "after_items": [0]},
            {"type": "email.send", "after_items": [2]},
            {"type": "email.send", "after_items": [10**30]},
            {"type": "email.send"},
        ],
    )
    assert [a["status"] for a in answers] == [422, 422, 422, 201]
    assert all(a["errors"] == {"after_items": "must name earlier items only"} for a in answers[:3])
    assert job_count(app) == 1


def test_an_item_cannot_wait_for_a_job_made_by_the_same_request(app: Flask, producer: Api) -> None:
    """Guessing the ids the batch's own items get (the next ids) names jobs that did not exist
    before the request: 422 as for a job that does not exist, so no item waits for itself or
    for a later one."""
    last = producer.enqueue()["id"]
    answers = _each(
        producer,
        [
            {"type": "email.send"},  # gets last + 1
            {"type": "email.send", "depends_on": [last + 1]},  # an earlier item's job
            {"type": "email.send", "depends_on": [last + 2]},  # its own, or a later one's
            {"type": "email.send"},  # gets last + 2
        ],
    )
    assert [a["status"] for a in answers] == [201, 422, 422, 201]
    assert [answers[i]["job"]["id"] for i in (0, 3)] == [last + 1, last + 2]
    for index, parent in ((1, last + 1), (2, last + 2)):
        assert answers[index]["errors"] == {"depends_on": f"job {parent} does not exist"}
    assert job_count(app) == 3


class TestTheBatchLimit:
    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"MAX_BATCH": 3}

    def test_max_batch_items_are_admitted_and_one_more_refuses_the_batch(
        self, app: Flask, producer: Api
    ) -> None:
        assert [a["status"] for a in _each(producer, [{"type": "email.send"}] * 3)] == [201] * 3
        before = snapshot(app)
        body = {"jobs": [{"type": "email.send"}] * 4, "atomic": False}
        problem = assert_problem(producer.post("/jobs/batch", body), 422)
        assert problem["errors"] == {"jobs": "must hold from 1 to 3 items"}
        assert snapshot(app) == before


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(levels):
        node = {"a": node}
    return node


HOSTILE_ITEMS = [
    {"type": "email.send\u0000"},
    {"type": "\ud800"},
    {"type": "email.send", "payload": {"\udfff": 1}},
    {"type": "email.send", "payload": {"a": "\u0000"}},
    {"type": "email.send", "payload": {"a": "x\ud83d"}},
    {"type": "email.send", "idempotency_key": "k\u0000"},
    {"type": "email.send", "unique_key": "\ud800"},
    {"type": "email.send", "run_at": "+275760-09-13T00:00:00Z"},
    {"type": "email.send", "max_retries": 10**400},
    {"type": "email.send", "priority": None},
    {"type": "email.send", "depends_on": [0]},
    {"type": "email.send", "depends_on": [2**63]},
    {"type": "email.send", "depends_on": [True]},
    {"type": "email.send", "depends_on": ["1"]},
    {"type": "email.send", "secrets": {"a\u0000": "x"}},
    {"type": "email.send", "partition": "p\u0000"},
    {"type": "email.send", "on_dependency_failure": "explode"},
    {"type": "email.send", "payload": {"a": "b" * 70_000}},
    {"type": "email.send", "payload": _nested(28)},
    {"type": "email.send"},
]


def test_hostile_items_are_answered_as_post_jobs_answers_them(
    app: Flask, client: FlaskClient
) -> None:
    batching = make_api(app, client, "batching", "producer")
    alone = make_api(app, client, "alone", "producer")
    answers = _each(batching, HOSTILE_ITEMS)
    singles = [_alone(alone, item) for item in HOSTILE_ITEMS]
    assert [_comparable(a) for a in answers] == [_comparable(s) for s in singles]
    assert all(a["status"] in (201, 422) for a in answers), answers
    assert [a["status"] for a in answers].count(201) == 2


@pytest.mark.parametrize("after_items", [[-1], [True], ["0"], 0, [[0]], [None]])
def test_a_malformed_after_items_is_that_items_422(producer: Api, after_items: Any) -> None:
    items = [{"type": "email.send"}, {"type": "email.send", "after_items": after_items}]
    answers = _each(producer, items)
    assert [a["status"] for a in answers] == [201, 422]
    assert list(answers[1]["errors"]) == ["after_items"]


def test_an_item_as_deep_as_post_jobs_allows_is_answered_on_its_own(
    app: Flask, client: FlaskClient
) -> None:
    """A payload nested as deep as a ``POST /jobs`` body may be (MAX_JSON_DEPTH counts from
    the body) sits two levels deeper in a batch: it is still that item's to answer (201 as
    alone), not a 400 that refuses every other item with it."""
    batching = make_api(app, client, "batching", "producer")
    alone = make_api(app, client, "alone", "producer")
    deepest = {"type": "email.send", "payload": _nested(30)}  # the body: 32 levels
    too_deep = {"type": "email.send", "payload": _nested(31)}
    assert alone.post("/jobs", deepest).status_code == 201
    assert_problem(alone.post("/jobs", too_deep), 400)
    answers = _each(batching, [{"type": "email.send"}, deepest])
    assert [a["status"] for a in answers] == [201, 201]
    before = snapshot(app)
    body = {"jobs": [{"type": "email.send"}, too_deep], "atomic": False}
    assert_problem(batching.post("/jobs/batch", body), 400)
    assert snapshot(app) == before
