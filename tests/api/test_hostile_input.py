"""Strict input: a table of hostile requests, each answered with a clear 4xx that changes
nothing, never a 500."""

from __future__ import annotations

import base64
import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from flask import Flask

from app import create_app
from app.infra import db
from tests.api.conftest import assert_problem, snapshot
from tests.backends import BACKENDS
from tests.builders import Api, make_api
from tests.conftest import base_config
from tests.pg_databases import Databases

JSON = "application/json"


@dataclass(frozen=True)
class Bad:
    """One hostile request: who sends it where, what it carries, the answer it must get."""

    status: int
    route: str  # enqueue | list | claim | complete | fail | heartbeat | cancel
    data: bytes | None = None
    content_type: str | None = JSON
    query: dict[str, str] = field(default_factory=dict)
    field: str | None = None  # for 422: the field named in ``errors``


def enq(raw: str | bytes, status: int, fld: str | None = None, **kw: Any) -> Bad:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return Bad(status, "enqueue", data, field=fld, **kw)


def lst(code: int, fld: str | None = None, **query: str) -> Bad:
    return Bad(code, "list", None, None, query, fld)


def body(route: str, raw: str | bytes, status: int, fld: str | None = None, **kw: Any) -> Bad:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return Bad(status, route, data, field=fld, **kw)


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


T = '"type": "email.send"'
CASES: dict[str, Bad] = {
    # 415: not JSON
    "text/plain": enq('{"type": "email.send"}', 415, content_type="text/plain"),
    "form": enq("type=email.send", 415, content_type="application/x-www-form-urlencoded"),
    "no content type": enq('{"type": "email.send"}', 415, content_type=None),
    "json-ish type": enq('{"type": "email.send"}', 415, content_type="application/json-patch+json"),
    "multipart": enq("--x\r\n\r\n--x--", 415, content_type="multipart/form-data; boundary=x"),
    "xml": enq("<job/>", 415, content_type="application/xml"),
    "claim text/plain": body("claim", "{}", 415, content_type="text/plain"),
    "fail form": body("fail", "error=x", 415, content_type="application/x-www-form-urlencoded"),
    # 400: not a well-formed JSON object
    "empty body": enq("", 400),
    "whitespace body": enq("   ", 400),
    "truncated": enq('{"type": "email.se', 400),
    "trailing garbage": enq('{"type": "email.send"} x', 400),
    "single quotes": enq("{'type': 'email.send'}", 400),
    "trailing comma": enq('{"type": "email.send",}', 400),
    "NaN": enq('{"type": "email.send", "payload": {"x": NaN}}', 400),
    "Infinity": enq('{"type": "email.send", "payload": {"x": Infinity}}', 400),
    "-Infinity": enq('{"type": "email.send", "max_retries": -Infinity}', 400),
    "duplicate keys": enq('{"type": "email.send", "type": "report.build"}', 400),
    "nested duplicate keys": enq('{"type": "email.send", "payload": {"a": 1, "a": 2}}', 400),
    "too deep": enq('{"type": "email.send", "payload": ' + '{"a": ' * 40 + "1" + "}" * 41, 400),
    "array body": enq('["email.send"]', 400),
    "string body": enq('"email.send"', 400),
    "number body": enq("1", 400),
    "null body": enq("null", 400),
    "true body": enq("true", 400),
    "invalid utf-8": enq(b'{"type": "email.send\xff"}', 400),
    "utf-16": enq('{"type": "email.send"}'.encode("utf-16"), 400),
    "overlong utf-8": enq(b'{"type": "\xc0\xafemail.send"}', 400),
    "claim malformed": body("claim", "{", 400),
    "claim array": body("claim", "[]", 400),
    "complete NaN": body("complete", '{"result": {"x": NaN}}', 400),
    "fail duplicate": body("fail", '{"error": "a", "error": "b"}', 400),
    "heartbeat null": body("heartbeat", "null", 400),
    "cancel array": body("cancel", "[1]", 400),
    # 422: well-formed JSON that breaks a rule
    "unknown field": enq("{" + T + ', "status": "completed"}', 422, "status"),
    "mass assignment id": enq("{" + T + ', "id": 1}', 422, "id"),
    "mass assignment owner": enq("{" + T + ', "created_by": 1}', 422, "created_by"),
    "true as integer": enq("{" + T + ', "max_retries": true}', 422, "max_retries"),
    "float as integer": enq("{" + T + ', "max_retries": 2.0}', 422, "max_retries"),
    "string as integer": enq("{" + T + ', "max_retries": "3"}', 422, "max_retries"),
    "max_retries 26": enq("{" + T + ', "max_retries": 26}', 422, "max_retries"),
    "max_retries -1": enq("{" + T + ', "max_retries": -1}', 422, "max_retries"),
    "max_retries huge": enq("{" + T + ', "max_retries": ' + "9" * 400 + "}", 422, "max_retries"),
    "priority unknown": enq("{" + T + ', "priority": "urgent"}', 422, "priority"),
    "priority number": enq("{" + T + ', "priority": 30}', 422, "priority"),
    "priority list": enq("{" + T + ', "priority": ["low"]}', 422, "priority"),
    "priority object": enq("{" + T + ', "priority": {"low": 1}}', 422, "priority"),
    "max_retries list": enq("{" + T + ', "max_retries": [3]}', 422, "max_retries"),
    "type object": enq('{"type": {"email.send": 1}}', 422, "type"),
    "run_at list": enq("{" + T + ', "run_at": ["2030-01-01T00:00:00Z"]}', 422, "run_at"),
    "run_at year 0": enq("{" + T + ', "run_at": "0000-01-01T00:00:00Z"}', 422, "run_at"),
    "run_at overflow": enq("{" + T + ', "run_at": "9999-12-31T23:59:59-23:59"}', 422, "run_at"),
    "fail retryable list": body("fail", '{"error": "x", "retryable": [true]}', 422, "retryable"),
    "payload array": enq("{" + T + ', "payload": [1, 2]}', 422, "payload"),
    "payload string": enq("{" + T + ', "payload": "x"}', 422, "payload"),
    "payload null": enq("{" + T + ', "payload": null}', 422, "payload"),
    "payload NUL": enq("{" + T + ', "payload": {"a": "x\\u0000"}}', 422, "payload"),
    "payload key surrogate": enq("{" + T + ', "payload": {"\\ud800": 1}}', 422, "payload"),
    "type NUL": enq('{"type": "email.send\\u0000"}', 422, "type"),
    "type lone surrogate": enq('{"type": "email.send\\udc00"}', 422, "type"),
    "type missing": enq('{"payload": {}}', 422, "type"),
    "key NUL": enq("{" + T + ', "idempotency_key": "k\\u0000"}', 422, "idempotency_key"),
    "key surrogate": enq("{" + T + ', "idempotency_key": "k\\ud83d"}', 422, "idempotency_key"),
    "key space": enq("{" + T + ', "idempotency_key": "a b"}', 422, "idempotency_key"),
    "key empty": enq("{" + T + ', "idempotency_key": ""}', 422, "idempotency_key"),
    "key too long": enq(
        "{" + T + ', "idempotency_key": "' + "k" * 256 + '"}', 422, "idempotency_key"
    ),
    "key number": enq("{" + T + ', "idempotency_key": 7}', 422, "idempotency_key"),
    "key non-ascii": enq("{" + T + ', "idempotency_key": "clé"}', 422, "idempotency_key"),
    "run_at garbage": enq("{" + T + ', "run_at": "tomorrow"}', 422, "run_at"),
    "run_at naive": enq("{" + T + ', "run_at": "2030-01-01T00:00:00"}', 422, "run_at"),
    "run_at number": enq("{" + T + ', "run_at": 1700000000}', 422, "run_at"),
    "run_at and delay": enq(
        "{" + T + ', "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 1}', 422, "run_at"
    ),
    "delay negative": enq("{" + T + ', "delay_seconds": -1}', 422, "delay_seconds"),
    "delay bool": enq("{" + T + ', "delay_seconds": true}', 422, "delay_seconds"),
    "delay huge": enq("{" + T + ', "delay_seconds": 1e300}', 422, "delay_seconds"),
    "claim worker_id": body("claim", '{"worker_id": "w"}', 422, "worker_id"),
    "claim lease 0": body("claim", '{"lease_seconds": 0}', 422, "lease_seconds"),
    "claim lease true": body("claim", '{"lease_seconds": true}', 422, "lease_seconds"),
    "claim lease huge": body("claim", '{"lease_seconds": 86401}', 422, "lease_seconds"),
    "claim lease string": body("claim", '{"lease_seconds": "60"}', 422, "lease_seconds"),
    "complete result list": body("complete", '{"result": [1]}', 422, "result"),
    "complete attempt 0": body("complete", '{"attempt": 0}', 422, "attempt"),
    "complete attempt true": body("complete", '{"attempt": true}', 422, "attempt"),
    "complete attempt huge": body("complete", '{"attempt": ' + "9" * 30 + "}", 422, "attempt"),
    "complete status": body("complete", '{"status": "failed"}', 422, "status"),
    "fail no error": body("fail", "{}", 422, "error"),
    "fail blank error": body("fail", '{"error": "  "}', 422, "error"),
    "fail error number": body("fail", '{"error": 5}', 422, "error"),
    "fail retryable string": body("fail", '{"error": "x", "retryable": "no"}', 422, "retryable"),
    "fail retry_in negative": body("fail", '{"error": "x", "retry_in": -5}', 422, "retry_in"),
    "fail retry_in bool": body("fail", '{"error": "x", "retry_in": false}', 422, "retry_in"),
    "heartbeat progress 101": body("heartbeat", '{"progress": 101}', 422, "progress"),
    "heartbeat progress -1": body("heartbeat", '{"progress": -1}', 422, "progress"),
    "heartbeat progress true": body("heartbeat", '{"progress": true}', 422, "progress"),
    "heartbeat progress float": body("heartbeat", '{"progress": 50.5}', 422, "progress"),
    "heartbeat message NUL": body("heartbeat", '{"message": "a\\u0000"}', 422, "message"),
    "heartbeat message long": body("heartbeat", '{"message": "' + "m" * 501 + '"}', 422, "message"),
    "cancel with fields": body("cancel", '{"reason": "x"}', 422, "reason"),
    # 422: bad filters and paging
    "status unknown": lst(422, "status", status="done"),
    "priority filter": lst(422, "priority", priority="30"),
    "limit 0": lst(422, "limit", limit="0"),
    "limit 1001": lst(422, "limit", limit="1001"),
    "limit negative": lst(422, "limit", limit="-1"),
    "limit text": lst(422, "limit", limit="ten"),
    "limit float": lst(422, "limit", limit="5.0"),
    "limit unicode digit": lst(422, "limit", limit="\u0665"),
    "limit huge": lst(422, "limit", limit="9" * 50),
    "cursor garbage": lst(422, "cursor", cursor="not-a-cursor"),
    "cursor plain id": lst(422, "cursor", cursor="5"),
    "cursor forged text": lst(422, "cursor", cursor=_cursor("v1:before:abc")),
    "cursor forged huge": lst(422, "cursor", cursor=_cursor("v1:before:" + "9" * 30)),
    "cursor wrong version": lst(422, "cursor", cursor=_cursor("v0:before:5")),
    "cursor wrong way": lst(422, "cursor", cursor=_cursor("v1:sideways:5")),
    "cursor non-ascii": lst(422, "cursor", cursor="\u00e9\u00e9\u00e9\u00e9"),
    "type filter NUL": lst(422, "type", type="email\x00send"),
    "type filter huge": lst(422, "type", type="t" * 201),
    "unknown filter": lst(422, "owner", owner="1"),
}


@dataclass
class Scene:
    """A database with a running job held by ``worker`` and a pending one owned by
    ``producer``: every case meets it as it was, since every case must change nothing."""

    app: Flask
    producer: Api
    worker: Api
    running: int
    pending: int


@pytest.fixture(scope="module", params=BACKENDS)
def scene(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scene]:
    """One scene per engine for the whole table (a case that changed it fails itself)."""
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            path = tmp_path_factory.mktemp("hostile") / "queuelog.sqlite3"
            shutil.copy(request.getfixturevalue("migrated_template"), path)
            url = f"sqlite:///{path}"
        else:
            databases: Databases = request.getfixturevalue("postgres_databases")
            url = stack.enter_context(databases.lent())
        app = create_app(base_config(url))
        stack.callback(db.close, app)
        client = app.test_client()
        producer = make_api(app, client, "producer", "producer")
        worker = make_api(app, client, "worker", "worker")
        running = producer.enqueue()
        assert worker.claim() is not None
        pending = producer.enqueue(idempotency_key="existing")
        yield Scene(app, producer, worker, running["id"], pending["id"])


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_hostile_input_gets_a_clear_4xx_and_changes_nothing(scene: Scene, case: Bad) -> None:
    producer, worker = scene.producer, scene.worker
    caller, method, path = {
        "enqueue": (producer, "POST", "/jobs"),
        "list": (producer, "GET", "/jobs"),
        "claim": (worker, "POST", "/jobs/claim"),
        "complete": (worker, "POST", f"/jobs/{scene.running}/complete"),
        "fail": (worker, "POST", f"/jobs/{scene.running}/fail"),
        "heartbeat": (worker, "POST", f"/jobs/{scene.running}/heartbeat"),
        "cancel": (producer, "POST", f"/jobs/{scene.pending}/cancel"),
    }[case.route]
    before = snapshot(scene.app)
    headers = caller.headers({"Content-Type": case.content_type} if case.content_type else {})
    response = caller.client.open(
        path, method=method, data=case.data, headers=headers, query_string=case.query
    )
    problem = assert_problem(response, case.status)
    if case.field is not None:
        assert case.field in problem["errors"], problem
    assert snapshot(scene.app) == before


@pytest.mark.parametrize(
    "path",
    [
        "/jobs/0",
        "/jobs/-1",
        "/jobs/abc",
        "/jobs/1.5",
        "/jobs/1e3",
        "/jobs/9999999999999999999999999999",
        "/jobs/999999999999999999",
        "/jobs/%00",
        "/jobs/1%00",
        "/jobs/\u0661",
        "/jobs/1/nothing",
        "/jobs/1/events/1",
        "/jobs//events",
        "/jobs/claim/1",
    ],
)
def test_unknown_job_paths_are_problem_404(admin: Api, path: str) -> None:
    assert_problem(admin.get(path), 404)
    is_job_url = path in ("/jobs/0", "/jobs/999999999999999999")
    assert_problem(admin.post(path, {}), 405 if is_job_url else 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/jobs/1"),
        ("PUT", "/jobs/1"),
        ("PATCH", "/jobs/1"),
        ("PUT", "/jobs"),
        ("DELETE", "/jobs"),
        ("GET", "/jobs/claim"),
        ("GET", "/jobs/1/complete"),
        ("GET", "/jobs/1/fail"),
        ("GET", "/jobs/1/cancel"),
        ("POST", "/jobs/1"),
        ("POST", "/jobs/1/events"),
    ],
)
def test_wrong_methods_are_problem_405(
    app: Flask, admin: Api, producer: Api, method: str, path: str
) -> None:
    producer.enqueue()
    before = snapshot(app)
    for caller in (admin, Api(admin.client, None)):
        response = caller.client.open(path, method=method, headers=caller.headers(), json={})
        assert_problem(response, 405)
        assert response.headers["Allow"]
    assert snapshot(app) == before


def test_huge_and_strange_headers_are_not_500(app: Flask, producer: Api) -> None:
    weird = [
        {"Authorization": "Bearer " + "x" * 10_000},
        {"Authorization": "Bearer ql_\u00e9\u00e9"},
        {"Authorization": "bearer"},
        {"Idempotency-Key": "k" * 10_000},
        {"Idempotency-Key": "\u00e9t\u00e9"},
        {"Content-Type": "application/json; charset=latin-1"},
    ]
    statuses = []
    for extra in weird:
        headers = producer.headers({"Content-Type": JSON}) | extra
        response = producer.client.post("/jobs", data=b'{"type": "email.send"}', headers=headers)
        statuses.append(response.status_code)
    assert statuses == [401, 401, 401, 422, 422, 201]
