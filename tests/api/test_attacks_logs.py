"""Attacks on the attempt-log routes: hostile and malformed bodies, huge lines, wrong types,
another worker's attempt, control characters; each a clear 4xx that stores nothing, or stored
mended, never a 500 (on both engines)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api.conftest import assert_problem
from tests.api.test_attempt_logs import held_job, log_rows, texts
from tests.builders import Api, make_api


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"attempt": "1", "lines": ["x"]}, "attempt"),
        ({"attempt": True, "lines": ["x"]}, "attempt"),
        ({"attempt": 0, "lines": ["x"]}, "attempt"),
        ({"attempt": -1, "lines": ["x"]}, "attempt"),
        ({"attempt": 2**63, "lines": ["x"]}, "attempt"),
        ({"attempt": 1.0, "lines": ["x"]}, "attempt"),
        ({"lines": ["x"]}, "attempt"),
        ({"attempt": 1}, "lines"),
        ({"attempt": 1, "lines": "x"}, "lines"),
        ({"attempt": 1, "lines": {"0": "x"}}, "lines"),
        ({"attempt": 1, "lines": [1]}, "lines[0]"),
        ({"attempt": 1, "lines": ["ok", None]}, "lines[1]"),
        ({"attempt": 1, "lines": [["x"]]}, "lines[0]"),
        ({"attempt": 1, "lines": [{"text": "x"}]}, "lines[0]"),
        ({"attempt": 1, "lines": ["\U0001f600" * 513]}, "lines[0]"),  # 2,052 bytes
        ({"attempt": 1, "lines": ["x"], "worker_id": "someone-else"}, "worker_id"),
        ({"attempt": 1, "lines": ["x"], "at": "2020-01-01T00:00:00Z"}, "at"),
    ],
)
def test_malformed_bodies_are_422_naming_the_field(
    app: Flask, producer: Api, worker: Api, body: dict[str, Any], field: str
) -> None:
    held = held_job(producer, worker)
    problem = assert_problem(worker.post(f"/jobs/{held['id']}/logs", body), 422)
    assert field in problem["errors"], problem
    assert log_rows(app) == 0


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "[]",
        "null",
        '"lines"',
        '{"attempt": 1, "lines": ["x"]',
        '{"attempt": 1, "attempt": 1, "lines": ["x"]}',
        '{"attempt": 1, "lines": [NaN]}',
    ],
)
def test_bodies_that_are_not_one_json_object_are_refused(
    app: Flask, producer: Api, worker: Api, raw: str
) -> None:
    held = held_job(producer, worker)
    answer = worker.post(
        f"/jobs/{held['id']}/logs", data=raw, headers={"Content-Type": "application/json"}
    )
    assert 400 <= answer.status_code < 500 and answer.mimetype == "application/problem+json"
    assert log_rows(app) == 0


def test_a_body_over_the_request_limit_is_413(app: Flask, producer: Api, worker: Api) -> None:
    held = held_job(producer, worker)
    huge = {"attempt": held["attempt"], "lines": ["x" * 2048] * 600}  # 1.2 MB
    assert_problem(worker.post(f"/jobs/{held['id']}/logs", huge), 413)
    assert log_rows(app) == 0


def test_another_workers_attempt_is_409_and_stores_nothing(
    app: Flask, client: FlaskClient, producer: Api, worker: Api, admin: Api
) -> None:
    held = held_job(producer, worker)
    intruder = make_api(app, client, "intruder", "worker")
    body = {"attempt": held["attempt"], "lines": ["forged line"]}
    assert_problem(intruder.post(f"/jobs/{held['id']}/logs", body), 409)
    assert_problem(admin.post(f"/jobs/{held['id']}/logs", body), 409)  # admins hold nothing
    pending = producer.enqueue()
    assert_problem(worker.post(f"/jobs/{pending['id']}/logs", body), 409)  # not running
    assert log_rows(app) == 0


def test_control_characters_and_nul_are_stored_mended(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    held = held_job(producer, worker)
    lines = ["a\x00b", "\x1b]8;;http://evil\x07link\x1b]8;;\x07", "tab\tkept", "\u202egnp.exe"]
    answer = worker.post(f"/jobs/{held['id']}/logs", {"attempt": held["attempt"], "lines": lines})
    assert answer.status_code == 200, answer.get_json()
    stored = texts(admin, held["id"])[1]
    assert stored[0] == "a\ufffdb" and "\x1b" not in stored[1] and "\x07" not in stored[1]
    assert stored[2] == "tab\tkept" and stored[3] == "gnp.exe"


def test_the_read_route_takes_no_body_and_refuses_odd_ids(admin: Api, worker: Api) -> None:
    assert admin.get("/jobs/0/logs").status_code == 404
    assert admin.get("/jobs/99999999999999999999999/logs").status_code == 404
    assert admin.get("/jobs/abc/logs").status_code == 404
    assert worker.get("/jobs/abc/logs").status_code == 404  # no route: nothing to refuse
