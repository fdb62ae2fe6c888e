"""Request models of the domain, shared by the API and the pages: one InvalidInput per field."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.config import DEFAULTS
from app.queue.contract.cursors import encode_cursor
from app.queue.contract.job_requests import (
    ClaimBody,
    CompleteBody,
    EnqueueBody,
    FailBody,
    HeartbeatBody,
    ListQuery,
)
from app.queue.rules.settings import QueueSettings
from app.queue.vocabulary.errors import InvalidInput
from app.queue.vocabulary.jobs import EnqueueRequest, JobFilters

SETTINGS = QueueSettings.from_config(DEFAULTS | {"JOB_TYPES": ["email.send", "report.build"]})


def enqueue(
    body: dict[str, Any], settings: QueueSettings = SETTINGS, **context: Any
) -> EnqueueRequest:
    return EnqueueBody.parse(body, settings, **context).to_request()


def filters(args: dict[str, str]) -> JobFilters:
    return ListQuery.from_args(args, SETTINGS).to_filters()


def _errors(call: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
    with pytest.raises(InvalidInput) as caught:
        call(*args, **kwargs)
    assert caught.value.status == 422
    return caught.value.errors


def test_enqueue_defaults() -> None:
    request = enqueue({"type": "email.send"})
    assert request.type == "email.send"
    assert request.payload == {}
    assert (request.priority, request.max_retries) == (0, 3)
    assert request.idempotency_key is request.run_at is request.delay_seconds is None


def test_enqueue_reports_every_bad_field_at_once() -> None:
    errors = _errors(
        enqueue,
        {
            "type": "nope",
            "payload": [],
            "priority": "urgent",
            "max_retries": True,
            "idempotency_key": "has space",
            "delay_seconds": -1,
            "extra": 1,
        },
    )
    assert set(errors) == {
        "type",
        "payload",
        "priority",
        "max_retries",
        "idempotency_key",
        "delay_seconds",
        "extra",
    }
    assert errors["extra"] == "unknown field"


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, [], {}, -1, 26, 2**70])
def test_max_retries_must_be_an_integer_0_to_25(value: Any) -> None:
    errors = _errors(enqueue, {"type": "email.send", "max_retries": value})
    assert "max_retries" in errors


@pytest.mark.parametrize("value", [0, 25])
def test_max_retries_bounds_are_inclusive(value: int) -> None:
    assert enqueue({"type": "email.send", "max_retries": value}).max_retries == value


@pytest.mark.parametrize("value", ["urgent", "LOW", 0, 30, None, ["low"], {"low": 0}, True])
def test_priority_must_be_a_label(value: Any) -> None:
    assert "priority" in _errors(enqueue, {"type": "email.send", "priority": value}, SETTINGS)


def test_fingerprint_is_the_request_after_defaults() -> None:
    bare = enqueue({"type": "email.send", "idempotency_key": "k"})
    explicit = enqueue(
        {"type": "email.send", "payload": {}, "priority": "low", "max_retries": 3},
        header_key="k",
    )
    assert bare.fingerprint == explicit.fingerprint
    keyed = {"type": "email.send", "idempotency_key": "k"}
    reordered = enqueue({**keyed, "payload": {"b": 2, "a": 1}}, SETTINGS)
    ordered = enqueue({**keyed, "payload": {"a": 1, "b": 2}})
    assert reordered.fingerprint == ordered.fingerprint
    other = enqueue({**keyed, "payload": {"a": 2}})
    assert other.fingerprint != ordered.fingerprint


def test_only_a_request_with_an_idempotency_key_has_a_fingerprint() -> None:
    """Nothing ever compares the fingerprint of a request without a key."""
    assert enqueue({"type": "email.send", "payload": {"a": 1}}).fingerprint is None
    assert enqueue({"type": "email.send"}, header_key="h").fingerprint is not None


def test_idempotency_key_body_and_header_must_agree() -> None:
    assert enqueue({"type": "email.send"}, header_key="h").idempotency_key == "h"
    same = enqueue({"type": "email.send", "idempotency_key": "h"}, SETTINGS, header_key="h")
    assert same.idempotency_key == "h"
    errors = _errors(
        enqueue,
        {"type": "email.send", "idempotency_key": "a"},
        header_key="b",
    )
    assert "idempotency_key" in errors


@pytest.mark.parametrize(
    "key", ["", " ", "a b", "k" * 256, "\x00", "caf\u00e9", "\ud800", "tab\there", 5, True]
)
def test_bad_idempotency_keys(key: Any) -> None:
    assert "idempotency_key" in _errors(enqueue, {"type": "email.send", "idempotency_key": key})
    if isinstance(key, str):
        assert "idempotency_key" in _errors(enqueue, {"type": "email.send"}, header_key=key)


@pytest.mark.parametrize("key", ["k", "k" * 255, "order-1", "';DROP--", "a/b:c?d=e"])
def test_good_idempotency_keys(key: str) -> None:
    assert enqueue({"type": "email.send", "idempotency_key": key}).idempotency_key == key


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2030-01-02T03:04:05Z", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2030-01-02T05:04:05+02:00", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ],
)
def test_run_at_normalizes_to_utc(value: str, expected: datetime) -> None:
    parsed = enqueue({"type": "email.send", "run_at": value}).run_at
    assert parsed == expected
    assert isinstance(parsed, datetime) and parsed.utcoffset() is not None


@pytest.mark.parametrize(
    "value", ["2030-01-02T03:04:05", "tomorrow", "", 5, True, "2" * 65, "0001-01-01T00:00:00+01:00"]
)
def test_run_at_refuses(value: Any) -> None:
    assert "run_at" in _errors(enqueue, {"type": "email.send", "run_at": value})


def test_run_at_or_delay_not_both() -> None:
    body = {"type": "email.send", "run_at": "2030-01-02T03:04:05Z", "delay_seconds": 5}
    assert _errors(enqueue, body) == {"run_at": "give run_at or delay_seconds, not both"}
    assert enqueue({"type": "email.send", "delay_seconds": 5}).delay_seconds == 5.0


def test_payload_limits() -> None:
    small = QueueSettings.from_config(DEFAULTS | {"MAX_PAYLOAD_BYTES": 20, "MAX_JSON_DEPTH": 3})
    ok = enqueue({"type": "email.send", "payload": {"a": "x" * 12}}, small)
    assert ok.payload == {"a": "x" * 12}
    big = _errors(enqueue, {"type": "email.send", "payload": {"a": "x" * 13}}, small)
    assert "bytes" in big["payload"]
    deep = _errors(enqueue, {"type": "email.send", "payload": {"a": {"b": {"c": {}}}}}, small)
    assert "deeper" in deep["payload"]


@pytest.mark.parametrize(
    "payload",
    [{"a": "x\x00"}, {"\x00": 1}, {"a": ["\udfff"]}, {"a": float("nan")}, {"a": float("inf")}],
)
def test_payload_must_be_storable(payload: dict[str, Any]) -> None:
    assert "payload" in _errors(enqueue, {"type": "email.send", "payload": payload}, SETTINGS)


def test_claim_fail_heartbeat_complete_rules() -> None:
    assert ClaimBody.parse({}, SETTINGS).lease_seconds is None
    assert ClaimBody.parse({"lease_seconds": 30}, SETTINGS).lease_seconds == 30
    for bad in (0, True, 86_401, 30.0):
        assert "lease_seconds" in _errors(ClaimBody.parse, {"lease_seconds": bad}, SETTINGS)
    assert "worker_id" in _errors(ClaimBody.parse, {"worker_id": "w"}, SETTINGS)
    assert ClaimBody.parse({}, SETTINGS).wait_seconds == 0
    assert ClaimBody.parse({"wait_seconds": 30}, SETTINGS).wait_seconds == 30
    assert ClaimBody.parse({"wait_seconds": 0.5}, SETTINGS).wait_seconds == 0.5
    for wait in (-1, 30.5, "5", True, None):
        assert "wait_seconds" in _errors(ClaimBody.parse, {"wait_seconds": wait}, SETTINGS)
    fail = FailBody.parse({"error": "e"}, SETTINGS)
    assert (fail.error, fail.attempt, fail.retry_in, fail.retryable) == ("e", None, None, True)
    fail = FailBody.parse({"error": "e", "attempt": 2, "retry_in": 0, "retryable": False}, SETTINGS)
    assert (fail.error, fail.attempt, fail.retry_in, fail.retryable) == ("e", 2, 0, False)
    for bad_fail in ({"error": " "}, {}, {"error": 1}):
        assert "error" in _errors(FailBody.parse, bad_fail, SETTINGS)
    assert "retry_in" in _errors(FailBody.parse, {"error": "e", "retry_in": float("inf")}, SETTINGS)
    assert "retryable" in _errors(FailBody.parse, {"error": "e", "retryable": 1}, SETTINGS)
    beat = HeartbeatBody.parse({"progress": 0, "message": "m"}, SETTINGS)
    assert (beat.progress, beat.message, beat.attempt) == (0, "m", None)
    assert "progress" in _errors(HeartbeatBody.parse, {"progress": 100.0}, SETTINGS)
    assert "message" in _errors(HeartbeatBody.parse, {"message": "a\x00"}, SETTINGS)
    assert "message" in _errors(HeartbeatBody.parse, {"message": "m" * 501}, SETTINGS)
    done = CompleteBody.parse({"result": {"r": 1}, "attempt": 1}, SETTINGS)
    assert (done.result, done.attempt) == ({"r": 1}, 1)
    assert "attempt" in _errors(CompleteBody.parse, {"attempt": -3}, SETTINGS)
    assert "attempt" in _errors(CompleteBody.parse, {"attempt": True}, SETTINGS)
    assert "result" in _errors(CompleteBody.parse, {"result": [1]}, SETTINGS)


def test_filters_and_cursor_round_trip() -> None:
    found = filters(
        {"status": "pending", "type": "email.send", "priority": "high", "limit": "1000"}
    )
    assert (found.status, found.type, found.priority, found.limit) == (
        "pending",
        "email.send",
        20,
        1000,
    )
    assert filters({}).limit == 50
    before = filters({"cursor": encode_cursor("before", 42)})
    assert (before.before_id, before.after_id) == (42, None)
    after = filters({"cursor": encode_cursor("after", 7)})
    assert (after.before_id, after.after_id) == (None, 7)


@pytest.mark.parametrize(
    "args",
    [
        {"limit": "0"},
        {"limit": "1001"},
        {"limit": " 5"},
        {"limit": "+5"},
        {"status": "PENDING"},
        {"priority": "20"},
        {"cursor": "!!!"},
        {"cursor": "djE6YmVmb3JlOi0x"},  # v1:before:-1
        {"type": "a\x00"},
        {"q": "x" * 256},
        {"nope": "1"},
    ],
)
def test_bad_filters(args: dict[str, str]) -> None:
    assert set(_errors(filters, args)) == set(args)
