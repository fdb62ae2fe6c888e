"""One test per weakness of the original design's assessment (V-01..V-10; V-06 lives with the
multi-process race tests)."""

from __future__ import annotations

import http.client
import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.accounts import service as accounts
from app.infra import db
from app.queue.usecases import claiming
from app.queue.vocabulary.timeutil import utcnow
from devservers.accounts import AS_OPERATOR
from tests.api.conftest import (
    LiveServer,
    assert_problem,
    event_rows,
    job_count,
    job_row,
    snapshot,
)
from tests.builders import Api, make_api, make_token, make_user

ALL_ROUTES = [
    ("POST", "/jobs"),
    ("GET", "/jobs"),
    ("GET", "/jobs/1"),
    ("GET", "/jobs/1/events"),
    ("POST", "/jobs/claim"),
    ("POST", "/jobs/1/complete"),
    ("POST", "/jobs/1/fail"),
    ("POST", "/jobs/1/heartbeat"),
    ("POST", "/jobs/1/cancel"),
    ("POST", "/jobs/1/retry"),
]

SECRETS = {
    "dsn": "postgresql://queuelog:hunter2dsn@db.internal:5432/prod",
    "bearer": "Authorization: Bearer abcDEF123tokenvalue",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJlc2VjcmV0",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "password": "password=pa55wordvalue",
    "api_key": "api_key=apikeyvalue777",
    "private_key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAprivatekeymaterial\n"
        "-----END RSA PRIVATE KEY-----"
    ),
    "path": "/home/deploy/app/settings_secret.py",
}
LEAKS = [
    "hunter2dsn",
    "abcDEF123tokenvalue",
    "c2lnbmF0dXJlc2VjcmV0",
    "AKIAIOSFODNN7EXAMPLE",
    "pa55wordvalue",
    "apikeyvalue777",
    "privatekeymaterial",
    "/home/deploy",
]


def _running_job(producer: Api, worker: Api, **fields: Any) -> dict[str, Any]:
    job = producer.enqueue(**fields)
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == job["id"]
    return claimed


# V-01 ---------------------------------------------------------------------------------------


def _bad_credentials(app: Flask) -> dict[str, dict[str, str]]:
    make_user(app, "revoked-user", "admin")
    revoked = make_token(app, "revoked-user")
    make_user(app, "disabled-user", "admin")
    disabled = make_token(app, "disabled-user")
    with app.app_context(), db.transaction() as conn:
        for token, _owner in accounts.list_tokens(conn, accounts.OPERATOR, "revoked-user"):
            accounts.revoke_token(
                conn,
                accounts.OPERATOR,
                token.id,
                now=utcnow(),
                origin=AS_OPERATOR,
            )
        accounts.set_disabled(
            conn,
            accounts.OPERATOR,
            "disabled-user",
            disabled=True,
            now=utcnow(),
            origin=AS_OPERATOR,
        )
    return {
        "missing": {},
        "empty bearer": {"Authorization": "Bearer "},
        "wrong scheme": {"Authorization": f"Basic {revoked}"},
        "garbage": {"Authorization": "Bearer not-a-token"},
        "unknown token": {"Authorization": "Bearer ql_" + "A" * 43},
        "revoked": {"Authorization": f"Bearer {revoked}"},
        "disabled user": {"Authorization": f"Bearer {disabled}"},
        "overlong": {"Authorization": "Bearer ql_" + "A" * 5000},
    }


@pytest.mark.parametrize(("method", "path"), ALL_ROUTES)
def test_v01_every_route_needs_a_valid_bearer_token(
    app: Flask, client: FlaskClient, producer: Api, method: str, path: str
) -> None:
    producer.enqueue()  # job 1 exists, so a 401 is not a disguised 404
    before = snapshot(app)
    for name, headers in _bad_credentials(app).items():
        response = client.open(path, method=method, headers=headers, json={"type": "email.send"})
        body = assert_problem(response, 401)
        assert response.headers["WWW-Authenticate"].startswith("Bearer"), name
        assert "detail" in body
    assert snapshot(app) == before


def test_v01_a_revoked_token_stops_on_the_next_request(app: Flask, client: FlaskClient) -> None:
    caller = make_api(app, client, "p", "producer")
    assert caller.get("/jobs").status_code == 200
    with app.app_context(), db.transaction() as conn:
        [(token, _)] = accounts.list_tokens(conn, accounts.OPERATOR, "p")
        accounts.revoke_token(conn, accounts.OPERATOR, token.id, now=utcnow(), origin=AS_OPERATOR)
    response = caller.get("/jobs")
    assert_problem(response, 401)
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("action", ["claim", "complete", "fail", "heartbeat"])
def test_v01_producer_cannot_work_jobs(app: Flask, producer: Api, worker: Api, action: str) -> None:
    job = _running_job(producer, worker)
    before = snapshot(app)
    path = "/jobs/claim" if action == "claim" else f"/jobs/{job['id']}/{action}"
    body = {"error": "boom"} if action == "fail" else {}
    assert_problem(producer.post(path, body), 403)
    assert snapshot(app) == before


@pytest.mark.parametrize("action", ["enqueue", "cancel", "retry"])
def test_v01_worker_cannot_enqueue_or_cancel(
    app: Flask, producer: Api, worker: Api, action: str
) -> None:
    job = producer.enqueue()
    before = snapshot(app)
    if action == "enqueue":
        response = worker.post("/jobs", {"type": "email.send"})
    else:
        response = worker.post(f"/jobs/{job['id']}/{action}")
    assert_problem(response, 403)
    assert snapshot(app) == before


# V-02 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "job_type",
    [
        "Email.send",
        "EMAIL.SEND",
        "email.send ",
        " email.send",
        "email.sen",
        "email.send.extra",
        "email.*",
        "email%",
        "",
        "email.send\n",
        "\u0435mail.send",  # Cyrillic ie
    ],
)
def test_v02_job_type_must_match_the_allowlist_exactly(
    app: Flask, producer: Api, job_type: str
) -> None:
    body = assert_problem(producer.post("/jobs", {"type": job_type}), 422)
    assert "type" in body["errors"]
    assert job_count(app) == 0


@pytest.mark.parametrize("job_type", [None, 1, True, ["email.send"], {"name": "email.send"}])
def test_v02_job_type_must_be_a_string(app: Flask, producer: Api, job_type: Any) -> None:
    body = assert_problem(producer.post("/jobs", {"type": job_type}), 422)
    assert "type" in body["errors"]
    assert_problem(producer.post("/jobs", {"payload": {}}), 422)
    assert job_count(app) == 0


def test_v02_every_allowed_type_is_accepted(producer: Api) -> None:
    for job_type in ("email.send", "report.build", "webhook.deliver"):
        assert producer.enqueue(job_type)["type"] == job_type


class TestV02ConfiguredAllowlist:
    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"JOB_TYPES": ["only.this"]}

    def test_v02_allowlist_comes_from_config(self, app: Flask, producer: Api) -> None:
        assert producer.enqueue("only.this")["type"] == "only.this"
        assert_problem(producer.post("/jobs", {"type": "email.send"}), 422)
        assert job_count(app) == 1


# V-03 ---------------------------------------------------------------------------------------


def test_v03_priority_above_the_producers_cap_is_forbidden(app: Flask, producer: Api) -> None:
    assert producer.enqueue(priority="low")["priority"] == "low"
    assert producer.enqueue(priority="medium")["priority"] == "medium"
    before = snapshot(app)
    for priority in ("high", "critical"):
        assert_problem(producer.post("/jobs", {"type": "email.send", "priority": priority}), 403)
    assert snapshot(app) == before


def test_v03_admin_may_use_critical(admin: Api, worker: Api) -> None:
    job = admin.enqueue(priority="critical")
    assert job["priority"] == "critical"
    claimed = worker.claim()
    assert claimed is not None and claimed["priority"] == "critical"


def test_v03_producer_with_high_cap_may_use_high(app: Flask, client: FlaskClient) -> None:
    high = make_api(app, client, "high-producer", "producer", max_priority="high")
    assert high.enqueue(priority="high")["priority"] == "high"
    assert_problem(high.post("/jobs", {"type": "email.send", "priority": "critical"}), 403)
    low = make_api(app, client, "low-producer", "producer", max_priority="low")
    assert low.enqueue(priority="low")["priority"] == "low"
    assert_problem(low.post("/jobs", {"type": "email.send", "priority": "medium"}), 403)
    assert job_count(app) == 2


def test_v03_the_stored_priority_is_the_number_of_the_label(app: Flask, admin: Api) -> None:
    for label, number in {"low": 0, "medium": 10, "high": 20, "critical": 30}.items():
        job = admin.enqueue(priority=label)
        assert job_row(app, job["id"])["priority"] == number


# V-04 ---------------------------------------------------------------------------------------


def test_v04_worker_id_in_a_body_is_rejected(app: Flask, producer: Api, worker: Api) -> None:
    producer.enqueue()
    before = snapshot(app)
    body = assert_problem(worker.post("/jobs/claim", {"worker_id": "someone-else"}), 422)
    assert body["errors"] == {"worker_id": "unknown field"}
    assert snapshot(app) == before
    assert_problem(producer.post("/jobs", {"type": "email.send", "worker_id": "x"}), 422)
    job = worker.claim()
    assert job is not None
    before = snapshot(app)
    for action, extra in [("complete", {}), ("fail", {"error": "e"}), ("heartbeat", {})]:
        response = worker.post(f"/jobs/{job['id']}/{action}", {**extra, "worker_id": "other"})
        assert assert_problem(response, 422)["errors"]["worker_id"] == "unknown field"
    assert snapshot(app) == before


def test_v04_worker_id_is_the_authenticated_name(
    app: Flask, producer: Api, worker: Api, other_worker: Api
) -> None:
    first = producer.enqueue()
    second = producer.enqueue()
    a = worker.claim()
    b = other_worker.claim()
    assert a is not None and b is not None
    assert (a["id"], a["worker_id"]) == (first["id"], "worker")
    assert (b["id"], b["worker_id"]) == (second["id"], "other-worker")
    assert job_row(app, first["id"])["worker_id"] == "worker"
    assert job_row(app, second["id"])["worker_id"] == "other-worker"
    assert event_rows(app, first["id"])[-1]["actor"] == "worker"
    # The holder's name keeps counting even with a token the holder created later.
    assert worker.post(f"/jobs/{first['id']}/complete").status_code == 200


# V-05 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["complete", "fail", "heartbeat"])
def test_v05_only_the_holder_may_finish_a_job(
    app: Flask, producer: Api, worker: Api, other_worker: Api, admin: Api, action: str
) -> None:
    job = _running_job(producer, worker)
    body = {"error": "not mine"} if action == "fail" else {}
    before = snapshot(app)
    for intruder in (other_worker, admin):
        assert_problem(intruder.post(f"/jobs/{job['id']}/{action}", body), 409)
    assert snapshot(app) == before
    assert worker.post(f"/jobs/{job['id']}/{action}", body).status_code == 200


@pytest.mark.parametrize("action", ["complete", "fail", "heartbeat"])
def test_v05_unknown_job_is_404(worker: Api, admin: Api, action: str) -> None:
    body = {"error": "x"} if action == "fail" else {}
    for caller in (worker, admin):
        assert_problem(caller.post(f"/jobs/424242/{action}", body), 404)
        assert_problem(caller.post(f"/jobs/999999999999999999/{action}", body), 404)


@pytest.mark.parametrize("action", ["complete", "fail", "heartbeat"])
def test_v05_not_running_or_stale_attempt_is_409(
    app: Flask, producer: Api, worker: Api, action: str
) -> None:
    body = {"error": "x"} if action == "fail" else {}
    pending = producer.enqueue()
    assert_problem(worker.post(f"/jobs/{pending['id']}/{action}", body), 409)
    job = worker.claim()
    assert job is not None and job["attempt"] == 1
    before = snapshot(app)
    assert_problem(worker.post(f"/jobs/{job['id']}/{action}", {**body, "attempt": 2}), 409)
    assert snapshot(app) == before
    assert worker.post(f"/jobs/{job['id']}/complete", {"attempt": 1}).status_code == 200
    before = snapshot(app)
    assert_problem(worker.post(f"/jobs/{job['id']}/{action}", body), 409)
    assert snapshot(app) == before


# V-07 ---------------------------------------------------------------------------------------


def _nested(levels: int) -> dict[str, Any]:
    """``levels`` nested objects, the innermost empty."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_v07_payload_over_the_byte_limit_is_422(app: Flask, producer: Api) -> None:
    overhead = len(json.dumps({"d": ""}, separators=(",", ":")))
    limit = app.config["MAX_PAYLOAD_BYTES"]
    fits = producer.enqueue(payload={"d": "x" * (limit - overhead)})
    assert len(fits["payload"]["d"]) == limit - overhead
    body = assert_problem(
        producer.post("/jobs", {"type": "email.send", "payload": {"d": "x" * (limit + 1)}}), 422
    )
    assert "payload" in body["errors"]
    # Multi-byte characters count as bytes, not characters.
    body = assert_problem(
        producer.post("/jobs", {"type": "email.send", "payload": {"d": "é" * (limit // 2)}}), 422
    )
    assert "payload" in body["errors"]
    assert job_count(app) == 1


def test_v07_result_over_the_byte_limit_is_422(app: Flask, producer: Api, worker: Api) -> None:
    job = _running_job(producer, worker)
    before = snapshot(app)
    big = {"d": "x" * (app.config["MAX_PAYLOAD_BYTES"] + 1)}
    body = assert_problem(worker.post(f"/jobs/{job['id']}/complete", {"result": big}), 422)
    assert "result" in body["errors"]
    assert snapshot(app) == before


def test_v07_body_over_max_content_length_is_413(app: Flask, producer: Api) -> None:
    huge = json.dumps({"type": "email.send", "payload": {"d": "x" * (1024 * 1024 + 10)}})
    response = producer.post("/jobs", data=huge, content_type="application/json")
    assert_problem(response, 413)
    assert job_count(app) == 0


def test_v07_nesting_deeper_than_32_levels_is_400(app: Flask, producer: Api) -> None:
    # The body is level 1, so the payload may hold 31 more levels.
    ok = producer.post("/jobs", {"type": "email.send", "payload": _nested(31)})
    assert ok.status_code == 201, ok.get_json()
    too_deep = producer.post("/jobs", {"type": "email.send", "payload": _nested(32)})
    assert_problem(too_deep, 400)
    arrays = '{"type": "email.send", "payload": {"a": ' + "[" * 40 + "]" * 40 + "}}"
    assert_problem(producer.post("/jobs", data=arrays, content_type="application/json"), 400)
    # Deep enough to blow a recursive parser's stack: still a clean 400.
    bomb = '{"type": "email.send", "payload": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert_problem(producer.post("/jobs", data=bomb, content_type="application/json"), 400)
    assert job_count(app) == 1


# V-08 ---------------------------------------------------------------------------------------

SQL_STRINGS = [
    "'; DROP TABLE jobs; --",
    '" OR 1=1 --',
    "' OR '1'='1",
    "%_\\",
    "1; DELETE FROM users",
    "Robert'); DROP TABLE api_tokens;--",
]


def test_v08_sql_metacharacters_are_stored_verbatim(app: Flask, producer: Api) -> None:
    payload = {s: s for s in SQL_STRINGS}
    key = "';DROP_TABLE_jobs;--%_\\\"`"
    job = producer.enqueue(payload=payload, idempotency_key=key)
    assert job["payload"] == payload
    assert job["idempotency_key"] == key
    row = job_row(app, job["id"])
    assert row["idempotency_key"] == key
    assert row["payload"] == payload
    again = producer.post(
        "/jobs", {"type": "email.send", "payload": payload, "idempotency_key": key}
    )
    assert again.status_code == 200 and again.get_json()["id"] == job["id"]
    assert producer.get(f"/jobs/{job['id']}").get_json()["payload"] == payload
    assert job_count(app) == 1


def test_v08_sql_metacharacters_in_filters_match_nothing(app: Flask, producer: Api) -> None:
    producer.enqueue()
    producer.enqueue("report.build")
    for value in [*SQL_STRINGS, "%", "_", "*"]:
        for name in ("type", "q"):
            response = producer.get("/jobs", query_string={name: value})
            assert response.status_code == 200, (name, value, response.get_json())
            assert response.get_json()["jobs"] == []
    assert len(producer.get("/jobs").get_json()["jobs"]) == 2
    assert job_count(app) == 2


class TestV08MetacharacterType:
    @pytest.fixture
    def app_config(self) -> dict[str, Any]:
        return {"JOB_TYPES": ["it's.a'type", 'quote"d;--']}

    def test_v08_a_type_with_quotes_round_trips(self, app: Flask, producer: Api) -> None:
        for job_type in ("it's.a'type", 'quote"d;--'):
            job = producer.enqueue(job_type)
            assert job_row(app, job["id"])["type"] == job_type
            listed = producer.get("/jobs", query_string={"type": job_type}).get_json()["jobs"]
            assert [j["id"] for j in listed] == [job["id"]]


# V-09 ---------------------------------------------------------------------------------------


def test_v09_same_key_same_request_returns_the_existing_job(app: Flask, producer: Api) -> None:
    first = producer.post("/jobs", {"type": "email.send", "idempotency_key": "order-1"})
    assert first.status_code == 201
    again = producer.post("/jobs", {"type": "email.send", "idempotency_key": "order-1"})
    assert again.status_code == 200
    assert again.get_json() == first.get_json()
    assert again.headers["Location"].endswith(f"/jobs/{first.get_json()['id']}")
    # The same request after defaults are applied is the same request.
    explicit = {
        "type": "email.send",
        "payload": {},
        "priority": "low",
        "max_retries": 3,
        "idempotency_key": "order-1",
    }
    assert producer.post("/jobs", explicit).status_code == 200
    assert job_count(app) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"type": "report.build"},
        {"payload": {"to": "b@example.com"}},
        {"priority": "medium"},
        {"max_retries": 5},
        {"delay_seconds": 60},
    ],
)
def test_v09_same_key_different_request_is_422(
    app: Flask, producer: Api, change: dict[str, Any]
) -> None:
    original = {"type": "email.send", "payload": {"to": "a@example.com"}, "idempotency_key": "k1"}
    job = producer.enqueue(**{k: v for k, v in original.items() if k != "type"})
    before = snapshot(app)
    body = assert_problem(producer.post("/jobs", original | change), 422)
    assert "idempotency_key" in body["errors"]
    assert snapshot(app) == before
    assert producer.get(f"/jobs/{job['id']}").get_json() == job


def test_v09_keys_are_scoped_per_producer(
    app: Flask, producer: Api, other_producer: Api, admin: Api
) -> None:
    mine = producer.enqueue(idempotency_key="shared-key")
    theirs = other_producer.enqueue(idempotency_key="shared-key")
    admins = admin.enqueue(idempotency_key="shared-key", payload={"different": True})
    assert len({mine["id"], theirs["id"], admins["id"]}) == 3
    assert other_producer.get(f"/jobs/{mine['id']}").status_code == 404
    again = other_producer.post("/jobs", {"type": "email.send", "idempotency_key": "shared-key"})
    assert again.status_code == 200 and again.get_json()["id"] == theirs["id"]
    assert job_count(app) == 3


def test_v09_key_in_header_or_body(app: Flask, producer: Api) -> None:
    first = producer.post("/jobs", {"type": "email.send"}, headers={"Idempotency-Key": "hdr-1"})
    assert first.status_code == 201
    assert first.get_json()["idempotency_key"] == "hdr-1"
    by_header = producer.post("/jobs", {"type": "email.send"}, headers={"Idempotency-Key": "hdr-1"})
    by_body = producer.post("/jobs", {"type": "email.send", "idempotency_key": "hdr-1"})
    both = producer.post(
        "/jobs",
        {"type": "email.send", "idempotency_key": "hdr-1"},
        headers={"Idempotency-Key": "hdr-1"},
    )
    for response in (by_header, by_body, both):
        assert response.status_code == 200
        assert response.get_json()["id"] == first.get_json()["id"]
    before = snapshot(app)
    conflicting = producer.post(
        "/jobs",
        {"type": "email.send", "idempotency_key": "body-key"},
        headers={"Idempotency-Key": "header-key"},
    )
    assert "idempotency_key" in assert_problem(conflicting, 422)["errors"]
    bad_header = producer.post("/jobs", {"type": "email.send"}, headers={"Idempotency-Key": "a b"})
    assert "idempotency_key" in assert_problem(bad_header, 422)["errors"]
    assert snapshot(app) == before


def _post_json(server: LiveServer, token: str, body: dict[str, Any]) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request(
            "POST",
            "/jobs",
            body=json.dumps(body),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def test_v09_concurrent_duplicates_make_exactly_one_job(
    app: Flask, live_server: LiveServer
) -> None:
    make_user(app, "racer", "producer")
    token = make_token(app, "racer")
    threads_per_key, keys = 8, ["race-a", "race-b", "race-c"]
    barrier = threading.Barrier(threads_per_key * len(keys))
    answers: list[tuple[str, int, Any]] = []
    lock = threading.Lock()

    def send(key: str) -> None:
        barrier.wait(timeout=30)
        try:
            status, body = _post_json(
                live_server,
                token,
                {"type": "email.send", "payload": {"k": key}, "idempotency_key": key},
            )
        except Exception as exc:  # recorded and asserted below
            status, body = -1, repr(exc)
        with lock:
            answers.append((key, status, body))

    threads = [
        threading.Thread(target=send, args=(k,)) for k in keys for _ in range(threads_per_key)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert len(answers) == threads_per_key * len(keys)
    for key in keys:
        mine = [(status, body) for k, status, body in answers if k == key]
        statuses = sorted(status for status, _ in mine)
        assert statuses == [200] * (threads_per_key - 1) + [201], (key, mine)
        assert len({body["id"] for _, body in mine}) == 1
    assert job_count(app) == len(keys)


# V-10 ---------------------------------------------------------------------------------------


def test_v10_errors_are_redacted_before_they_are_stored(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = _running_job(producer, worker, max_retries=0)
    error = "job crashed: " + " | ".join(SECRETS.values())
    response = worker.post(f"/jobs/{job['id']}/fail", {"error": error})
    assert response.status_code == 200
    assert response.get_json()["status"] == "failed"
    stored = job_row(app, job["id"])["error"]
    stored_events = [e["error"] for e in event_rows(app, job["id"]) if e["error"]]
    assert stored_events
    for text in [stored, *stored_events]:
        assert "job crashed" in text
        assert "[REDACTED]" in text
        for leak in LEAKS:
            assert leak not in text, (leak, text)
    shown = admin.get(f"/jobs/{job['id']}").get_json()["error"]
    assert shown == stored


def test_v10_redaction_happens_before_truncation(app: Flask, producer: Api, worker: Api) -> None:
    job = _running_job(producer, worker, max_retries=0)
    cap = app.config["MAX_ERROR_BYTES"]
    # The AWS key straddles the 4 KiB cut: truncating first would leave half of it behind.
    error = "x" * (cap - 25) + " AKIAIOSFODNN7EXAMPLE tail"
    assert worker.post(f"/jobs/{job['id']}/fail", {"error": error}).status_code == 200
    stored = job_row(app, job["id"])["error"]
    assert len(stored.encode("utf-8")) <= cap
    assert "AKIAIOSF" not in stored
    assert "[REDACTED]" in stored


def test_v10_stored_errors_are_capped_at_4_kib(app: Flask, producer: Api, worker: Api) -> None:
    job = _running_job(producer, worker, max_retries=0)
    assert worker.post(f"/jobs/{job['id']}/fail", {"error": "é" * 10_000}).status_code == 200
    stored = job_row(app, job["id"])["error"]
    assert 4000 < len(stored.encode("utf-8")) <= 4096
    assert all(len(e["error"].encode()) <= 4096 for e in event_rows(app, job["id"]) if e["error"])


@pytest.mark.parametrize(
    "hostile",
    [
        "://" + "a:" * 400_000,
        "eyJ" + "a" * 500_000 + "." * 300_000,
        "password=" * 110_000,
        "/a" * 450_000,
        "Bearer " * 130_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 30_000,
    ],
    ids=["dsn", "jwt", "password", "paths", "bearer", "pem"],
)
def test_v10_a_megabyte_of_hostile_error_text_is_sanitized(
    app: Flask, producer: Api, worker: Api, hostile: str
) -> None:
    job = _running_job(producer, worker, max_retries=0)
    response = worker.post(f"/jobs/{job['id']}/fail", {"error": hostile})
    assert response.status_code == 200
    assert len(job_row(app, job["id"])["error"].encode("utf-8")) <= 4096


def test_v10_error_key_only_for_admins(app: Flask, producer: Api, worker: Api, admin: Api) -> None:
    job = _running_job(producer, worker, max_retries=1)
    fail = worker.post(f"/jobs/{job['id']}/fail", {"error": "password=abc", "retry_in": 0})
    assert fail.status_code == 200
    assert "error" not in fail.get_json()
    job_id = job["id"]
    for caller, sees in [(producer, False), (worker, False), (admin, True)]:
        one = caller.get(f"/jobs/{job_id}").get_json()
        listed = caller.get("/jobs").get_json()["jobs"]
        events = caller.get(f"/jobs/{job_id}/events").get_json()["events"]
        assert [j["id"] for j in listed] == [job_id]
        assert ("error" in one) is sees
        assert ("error" in listed[0]) is sees
        assert all(("error" in e) is sees for e in events)
        if sees:
            assert one["error"] == listed[0]["error"] == "password=[REDACTED]"
            assert [e["error"] for e in events if e["kind"] == "retry_scheduled"] == [
                "password=[REDACTED]"
            ]
    # The worker's own later responses do not carry it either.
    again = worker.claim()
    assert again is not None and "error" not in again
    done = worker.post(f"/jobs/{job_id}/fail", {"error": "token=zzz"})
    assert done.status_code == 200 and "error" not in done.get_json()


def test_v10_lease_expiry_note_and_error_reach_admins_only(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    from app.infra.queue_settings import queue_settings

    job = _running_job(producer, worker, max_retries=0)
    later = datetime.now(UTC) + timedelta(days=2)
    with app.app_context(), db.transaction() as conn:
        assert (
            claiming.recover_expired(conn, now=later, settings=queue_settings(), limit=10).value
            == 1
        )
    assert admin.get(f"/jobs/{job['id']}").get_json()["error"] == "lease expired"
    assert "error" not in producer.get(f"/jobs/{job['id']}").get_json()
