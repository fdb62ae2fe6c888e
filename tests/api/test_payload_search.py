"""``GET /jobs?payload=``: the jobs whose payload contains a JSON object, with PostgreSQL's
``@>`` meaning on both engines, within every other filter, the paging and whose jobs the caller
may see; secret fields never match; bad input is a 422 on ``payload``. Every test runs on SQLite
and PostgreSQL (tests/api/conftest)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from flask import Flask

from tests.api.conftest import assert_problem, snapshot
from tests.api.test_secrets import SECRETS, VALUE
from tests.builders import Api

DOCUMENTS: dict[str, dict[str, Any]] = {
    "order": {
        "customer": 42,
        "region": "eu",
        "tags": ["a", "b"],
        "order": {"id": 7, "lines": [{"sku": "x", "qty": 1}, {"sku": "y", "qty": 2}]},
    },
    "text": {"customer": "42", "region": "eu", "flag": True, "none": None},
    "keys": {
        "customer": 42.0,
        "a.b": 1,
        "$": "dollar",
        "it's": "q",
        'say "hi"': "quote",
        "ünï": "cødé ✓",
        "tags": ["b"],
    },
    "deep": {"customer": 7, "nested": {"deep": {"x": [1, [2, 3]]}}, "flag": False, "n": 0},
}
# needle -> the documents containing it (PostgreSQL's jsonb @>, which both engines must give)
CONTAINS: list[tuple[dict[str, Any], set[str]]] = [
    ({}, set(DOCUMENTS)),
    ({"customer": 42}, {"order", "keys"}),  # 42.0 is the number 42
    ({"customer": "42"}, {"text"}),  # a string is not a number
    ({"customer": 42.5}, set()),
    ({"customer": 42, "region": "eu"}, {"order"}),
    ({"region": "eu"}, {"order", "text"}),
    ({"tags": ["a"]}, {"order"}),
    ({"tags": ["b"]}, {"order", "keys"}),
    ({"tags": ["b", "b"]}, {"order", "keys"}),
    ({"tags": []}, {"order", "keys"}),
    ({"tags": "b"}, set()),  # an element is not the array
    ({"order": {"id": 7}}, {"order"}),
    ({"order": {"lines": [{"sku": "y"}]}}, {"order"}),
    ({"order": {"lines": [{"sku": "y", "qty": 1}]}}, set()),  # one element must hold both
    ({"order": {"id": 7, "other": 1}}, set()),
    ({"flag": True}, {"text"}),
    ({"flag": False}, {"deep"}),
    ({"flag": 1}, set()),
    ({"n": 0}, {"deep"}),
    ({"n": False}, set()),
    ({"none": None}, {"text"}),
    ({"missing": None}, set()),
    ({"a.b": 1}, {"keys"}),
    ({"a": {"b": 1}}, set()),  # a dotted key is one key, not a path
    ({"$": "dollar"}, {"keys"}),
    ({"it's": "q"}, {"keys"}),
    ({'say "hi"': "quote"}, {"keys"}),
    ({"ünï": "cødé ✓"}, {"keys"}),
    ({"nested": {"deep": {"x": [[3]]}}}, {"deep"}),
    ({"nested": {"deep": {"x": [3]}}}, set()),  # 3 is inside the inner array only
    ({"nested": {"deep": {}}}, {"deep"}),
]


def search(caller: Api, needle: Any, **query: str) -> list[int]:
    """The ids of a payload search's first page (``needle`` as JSON unless it is text)."""
    text = needle if isinstance(needle, str) else json.dumps(needle)
    params = "".join(f"&{name}={quote(value)}" for name, value in query.items())
    response = caller.get(f"/jobs?payload={quote(text)}{params}")
    assert response.status_code == 200, response.get_json()
    return [job["id"] for job in response.get_json()["jobs"]]


def test_a_payload_contains_what_postgresqls_jsonb_containment_says(producer: Api) -> None:
    ids = {name: producer.enqueue(payload=doc)["id"] for name, doc in DOCUMENTS.items()}
    for needle, expected in CONTAINS:
        wanted = sorted((ids[name] for name in expected), reverse=True)
        assert search(producer, needle) == wanted, needle


def test_the_search_keeps_to_the_other_filters_and_pages(producer: Api, worker: Api) -> None:
    matching = [producer.enqueue(payload={"customer": 5, "n": n})["id"] for n in range(5)]
    producer.enqueue(payload={"customer": 6})
    medium_job = producer.enqueue("report.build", payload={"customer": 5}, priority="medium")["id"]
    claimed = worker.claim(types=["report.build"])
    assert claimed is not None and claimed["id"] == medium_job
    assert search(producer, {"customer": 5}, status="running") == [medium_job]
    assert search(producer, {"customer": 5}, type="report.build") == [medium_job]
    assert search(producer, {"customer": 5}, priority="medium") == [medium_job]
    assert search(producer, {"customer": 5}, status="pending") == matching[::-1]
    assert search(producer, {"customer": 5}, q=str(matching[2])) == [matching[2]]
    assert search(producer, {"customer": 6}, status="running") == []
    pages, cursor, needle = [], "", quote(json.dumps({"customer": 5}))
    while True:
        response = producer.get(f"/jobs?payload={needle}&limit=2{cursor}")
        body = response.get_json()
        pages.append([job["id"] for job in body["jobs"]])
        if body["next_cursor"] is None:
            break
        cursor = f"&cursor={body['next_cursor']}"
    assert pages == [
        [medium_job, matching[4]],
        [matching[3], matching[2]],
        [matching[1], matching[0]],
    ]


def test_callers_find_only_the_jobs_they_may_see(
    producer: Api, other_producer: Api, worker: Api, other_worker: Api, admin: Api
) -> None:
    mine = producer.enqueue(payload={"customer": 9})["id"]
    theirs = other_producer.enqueue(payload={"customer": 9})["id"]
    held = worker.claim()
    assert held is not None and held["id"] == mine
    assert search(producer, {"customer": 9}) == [mine]
    assert search(other_producer, {"customer": 9}) == [theirs]
    assert search(admin, {"customer": 9}) == [theirs, mine]
    assert search(worker, {"customer": 9}) == [mine]
    assert search(other_worker, {"customer": 9}) == []


def test_secret_fields_never_match(producer: Api, worker: Api, admin: Api) -> None:
    job = producer.enqueue(payload={"customer": 3}, secrets=SECRETS)["id"]
    assert search(admin, {"customer": 3}) == [job]  # the job is found by its payload
    for needle in (
        {"API_TOKEN": VALUE},
        {"secrets": SECRETS},
        {"secrets_sealed": VALUE},
        {"API_TOKEN": VALUE, "customer": 3},
    ):
        for caller in (producer, admin):
            assert search(caller, needle) == [], needle
    claimed = worker.claim()
    assert claimed is not None and claimed["secrets"] == SECRETS  # still there, still unmatched
    assert search(worker, {"API_TOKEN": VALUE}) == []


REFUSED = [
    "",  # given but empty is "any": not refused; checked apart below
    "not json",
    "[1]",
    "1",
    '"text"',
    "null",
    '{"a":1,"a":2}',
    '{"a":NaN}',
    '{"a":Infinity}',
    '{"a":1e400}',
    '{"a":123456789012345678901234567890}',
    '{"a":"\\u0000"}',
    '{"a":"\\ud800"}',
    '{"\\u0000":1}',
    '{"a":"' + "x" * 1100 + '"}',
    '{"a":' * 200 + "1" + "}" * 200,
    "{" * 5000,
]


@pytest.mark.parametrize("text", REFUSED[1:])
def test_a_search_that_is_not_a_small_json_object_is_a_422_on_payload(
    app: Flask, producer: Api, text: str
) -> None:
    producer.enqueue(payload={"a": 1})
    before = snapshot(app)
    body = assert_problem(producer.get(f"/jobs?payload={quote(text)}"), 422)
    assert set(body["errors"]) == {"payload"}
    assert snapshot(app) == before


def test_an_empty_or_repeated_payload_parameter(producer: Api) -> None:
    job = producer.enqueue(payload={"a": 1})["id"]
    assert [j["id"] for j in producer.get("/jobs?payload=").get_json()["jobs"]] == [job]
    body = assert_problem(producer.get("/jobs?payload=%7B%7D&payload=%7B%7D"), 422)
    assert set(body["errors"]) == {"payload"}


HOSTILE_KEYS = [
    "'; DROP TABLE jobs; --",
    '") OR 1=1 --',
    "$[0]",
    "$.a",
    "*",
    "%",
    "a\\b",
    "\\",
    "'",
    '"',
    "",
    " ",
    "\t",
    "\u202e",
    "1" * 300,
]


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_hostile_keys_are_plain_keys(admin: Api, producer: Api, key: str) -> None:
    """SQL-ish and path-ish keys are looked up as keys: never SQL, never a path, never a 500."""
    job = producer.enqueue(payload={key: "v", "other": 1})["id"]
    producer.enqueue(payload={"other": 1, "v": key})
    assert search(admin, {key: "v"}) == [job]
    assert search(admin, {key: "' OR 1=1 --"}) == []
    assert search(admin, {key: {"x": [key]}}) == []


@pytest.mark.parametrize(
    "value",
    [
        "' OR '1'='1",
        "x') OR 1=1; --",
        2**63 - 1,
        -(2**63),
        1e308,
        -0.0,
        "NaN",
        "Infinity",
        "1e400",
        [None, True, False, 0, ""],
        {"": {"": [{"": None}]}},
    ],
)
def test_hostile_values_match_only_themselves(producer: Api, value: Any) -> None:
    job = producer.enqueue(payload={"v": value})["id"]
    producer.enqueue(payload={"v": "other"})
    assert search(producer, {"v": value}) == [job]


def test_a_bulk_action_with_a_payload_filter_touches_exactly_the_matching_jobs(
    app: Flask, producer: Api, admin: Api
) -> None:
    matching = [producer.enqueue(payload={"customer": 8, "n": n})["id"] for n in range(3)]
    others = [
        producer.enqueue(payload=payload)["id"]
        for payload in ({"customer": "8"}, {"customer": 9}, {"n": 8}, {"customer": [8]})
    ]
    flt = {"payload": {"customer": 8}}
    preview = admin.post("/jobs/bulk", {"action": "cancel", "filter": flt, "reason": "INC-8"})
    assert preview.status_code == 200, preview.get_json()
    assert preview.get_json()["count"] == 3
    assert [job["id"] for job in preview.get_json()["sample"]] == matching[::-1]
    applied = admin.post(
        "/jobs/bulk", {"action": "cancel", "filter": flt, "reason": "INC-8", "expect_count": 3}
    )
    assert applied.status_code == 200 and applied.get_json()["affected"] == 3
    statuses = {job_id: admin.get(f"/jobs/{job_id}").get_json()["status"] for job_id in matching}
    assert set(statuses.values()) == {"cancelled"}
    assert {admin.get(f"/jobs/{job_id}").get_json()["status"] for job_id in others} == {"pending"}
    audit = admin.get("/audit?action=job_bulk").get_json()
    assert audit["events"][0]["details"]["filter"] == {"payload": {"customer": 8}}


@pytest.mark.parametrize(
    "payload",
    ['{"customer": 8}', [{"customer": 8}], 8, True, {"a": 2**70}, {"x": "y" * 1100}],
)
def test_a_bulk_payload_filter_that_is_not_a_small_object_is_refused(
    app: Flask, producer: Api, admin: Api, payload: Any
) -> None:
    producer.enqueue(payload={"customer": 8})
    before = snapshot(app)
    body = {"action": "cancel", "filter": {"payload": payload}, "reason": "INC-8"}
    response = admin.client.post(
        "/jobs/bulk",
        data=json.dumps(body),
        headers=admin.headers({"Content-Type": "application/json"}),
    )
    problem = assert_problem(response, 422)
    assert set(problem["errors"]) == {"filter.payload"}
    assert snapshot(app) == before
