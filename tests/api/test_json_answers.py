"""JSON answers: compact UTF-8 in the documented field order, and exactly the values stored
(a payload may hold integers beyond 64 bits, which pydantic's serializer writes too)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.builders import Api

FIELD_ORDER = ["id", "type", "payload", "priority", "status", "retry_count", "max_retries"]


def _answer(producer: Api, payload: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    created = producer.post("/jobs", {"type": "email.send", "payload": payload})
    assert created.status_code == 201, created.get_json()
    fetched = producer.get(f"/jobs/{created.get_json()['id']}")
    assert fetched.status_code == 200
    assert fetched.mimetype == "application/json"
    return fetched.get_data(), json.loads(fetched.get_data())


def test_an_answer_is_compact_utf8_in_field_order(producer: Api) -> None:
    raw, body = _answer(producer, {"to": "zoë@example.com", "note": "日本", "n": [1, 2.5, None]})
    assert body["payload"] == {"to": "zoë@example.com", "note": "日本", "n": [1, 2.5, None]}
    assert "zoë".encode() in raw and "日本".encode() in raw  # UTF-8, not \u escapes
    assert b'": ' not in raw and b", " not in raw  # compact
    assert list(body)[: len(FIELD_ORDER)] == FIELD_ORDER
    assert raw.endswith(b"}\n")


@pytest.mark.parametrize(
    "payload",
    [
        {"big": 2**64 + 1, "negative": -(2**70)},  # beyond 64 bits: orjson refuses these
        {"deep": {"list": [2**63 - 1, -(2**63), 2**64 - 1, 0.1, 2.5e-7]}},
        {"escapes": '\\"\n\t\u2028</script>'},
    ],
    ids=["big integers", "limits", "escapes"],
)
def test_every_value_comes_back_as_sent(producer: Api, payload: dict[str, Any]) -> None:
    _, body = _answer(producer, payload)
    assert body["payload"] == payload


def test_a_list_answer_carries_the_same_values(producer: Api) -> None:
    payloads = [{"big": 2**80}, {"text": "ünïcode"}]
    for payload in payloads:
        producer.enqueue(payload=payload)
    page = producer.get("/jobs")
    assert page.status_code == 200
    assert [job["payload"] for job in page.get_json()["jobs"]] == payloads[::-1]
    assert "ünïcode".encode() in page.get_data()  # UTF-8 beside a big integer too


def test_in_debug_mode_every_answer_is_indented_for_people(app: Any, producer: Api) -> None:
    """One rule for the response models and for every other answer (``jsonwire.indented``)."""
    app.debug = True
    try:
        raw, body = _answer(producer, {"n": 1})
        problem = producer.get("/jobs/999999")
    finally:
        app.debug = False
    assert raw.startswith(b'{\n  "id": ') and body["payload"] == {"n": 1}
    assert problem.status_code == 404 and problem.get_data().startswith(b"{\n  ")
