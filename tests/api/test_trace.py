"""W3C trace context: read from an enqueue's headers, handed back with the claimed job; a
malformed traceparent is ignored, never an error."""

from __future__ import annotations

from flask import Flask

from app.queue.vocabulary.trace import TRACESTATE_MAX, Trace, read_trace
from tests.builders import Api

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_claim_hands_back_the_enqueues_trace(producer: Api, worker: Api) -> None:
    headers = {"traceparent": PARENT, "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}
    job = producer.post("/jobs", {"type": "email.send"}, headers=headers).get_json()
    plain = producer.enqueue()
    expected = {"traceparent": PARENT, "tracestate": headers["tracestate"]}
    assert job["trace"] == expected and plain["trace"] is None
    claimed = worker.post("/jobs/claim", {"max_jobs": 2}).get_json()["jobs"]
    assert [c["trace"] for c in claimed] == [expected, None]


def test_a_batch_and_children_apply_the_trace_to_every_item(producer: Api, worker: Api) -> None:
    headers = {"traceparent": PARENT}
    items = [{"type": "email.send"}, {"type": "report.build"}]
    batch = producer.post("/jobs/batch", {"jobs": items}, headers=headers).get_json()
    assert [j["trace"] for j in batch["jobs"]] == [{"traceparent": PARENT, "tracestate": None}] * 2
    parent = worker.claim()
    assert parent is not None
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    spawned = worker.post(
        f"/jobs/{parent['id']}/children",
        {"attempt": parent["attempt"], "jobs": items},
        headers={"traceparent": other, "tracestate": "a=1"},
    ).get_json()
    assert [j["trace"] for j in spawned["jobs"]] == [
        {"traceparent": other, "tracestate": "a=1"}
    ] * 2


MALFORMED = [
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # another version
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero parent id
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",  # short flags
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
    "not a traceparent",
    "",
]


def test_a_malformed_traceparent_is_ignored(app: Flask, producer: Api) -> None:
    for traceparent in MALFORMED:
        headers = {"traceparent": traceparent, "tracestate": "a=1"}
        response = producer.post("/jobs", {"type": "email.send"}, headers=headers)
        assert response.status_code == 201
        assert response.get_json()["trace"] is None, traceparent
    doubled = [("traceparent", PARENT), ("traceparent", PARENT)]
    response = producer.client.post(
        "/jobs", json={"type": "email.send"}, headers=[*producer.headers().items(), *doubled]
    )
    assert response.status_code == 201 and response.get_json()["trace"] is None


def test_tracestate_is_bounded() -> None:
    assert read_trace(PARENT, None) == Trace(PARENT, None)
    assert read_trace(PARENT, " a=1 , b=2 ") == Trace(PARENT, "a=1 , b=2")
    long = ",".join(f"k{i}=" + "v" * 10 for i in range(40))
    assert read_trace(PARENT, long) == Trace(PARENT, None)  # 40 members: over 32
    assert read_trace(PARENT, "a=" + "v" * TRACESTATE_MAX) == Trace(PARENT, None)
    assert read_trace(PARENT, "no-equals-sign") == Trace(PARENT, None)
    assert read_trace(PARENT, "a=\u00e9") == Trace(PARENT, None)
    assert read_trace(None, "a=1") is None
