"""The API describes itself: /openapi.json is generated from the routes and models, public, and
true to what the app answers; /docs shows it under the app's own CSP."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.audit.queries import AuditEvents, AuditQuery
from app.infra.security import CONTENT_SECURITY_POLICY, is_api_path
from app.queue.contract.control_responses import ExplanationOut, ScheduleList, ScheduleOut, TypeList
from app.queue.contract.job_responses import EventList, JobList, JobOut
from tests.api.conftest import assert_problem
from tests.builders import Api

JSON_ROUTES = {
    ("/jobs", "post"),
    ("/jobs", "get"),
    ("/jobs/{job_id}", "get"),
    ("/jobs/{job_id}/events", "get"),
    ("/jobs/claim", "post"),
    ("/jobs/{job_id}/run-now", "post"),
    ("/jobs/{job_id}/complete", "post"),
    ("/jobs/{job_id}/fail", "post"),
    ("/jobs/{job_id}/heartbeat", "post"),
    ("/jobs/{job_id}/cancel", "post"),
    ("/jobs/{job_id}/retry", "post"),
    ("/jobs/{job_id}/release", "post"),
    ("/jobs/{job_id}/logs", "post"),
    ("/jobs/{job_id}/logs", "get"),
    ("/jobs/{job_id}/children", "post"),
    ("/groups/{group_id}", "get"),
    ("/jobs/batch", "post"),
    ("/jobs/finish", "post"),
    ("/jobs/heartbeat", "post"),
    ("/jobs/bulk", "post"),
    ("/metrics", "get"),
    ("/audit", "get"),
    ("/jobs/{job_id}/explain", "get"),
    ("/schedules", "get"),
    ("/schedules", "post"),
    ("/schedules/{schedule_id}", "get"),
    ("/schedules/{schedule_id}", "patch"),
    ("/schedules/{schedule_id}", "delete"),
    ("/schedules/{schedule_id}/run", "post"),
    ("/types", "get"),
    ("/types/{job_type}", "patch"),
}


@pytest.fixture
def backend() -> str:
    """SQLite only: the document does not depend on the database."""
    return "sqlite"


def _document(client: FlaskClient) -> dict[str, Any]:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return response.get_json()  # type: ignore[no-any-return]


def test_document_is_public_generated_openapi_3_1(client: FlaskClient) -> None:
    document = _document(client)  # no Authorization header
    assert document["openapi"] == "3.1.0"
    assert document["security"] == [{"bearerAuth": []}]
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    found = {(path, method) for path, ops in document["paths"].items() for method in ops}
    found = {(path, method) for path, method in found if method != "parameters"}
    assert found == JSON_ROUTES


def test_every_api_route_documents_itself(app: Flask, client: FlaskClient) -> None:
    """A new JSON route without ``documented`` fails here, so it cannot go undescribed."""
    paths = _document(client)["paths"]
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("api."):
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}:
                assert method.lower() in paths.get(path, {}), (path, method)


def test_document_uses_configured_values(app: Flask, client: FlaskClient) -> None:
    schemas = _document(client)["components"]["schemas"]
    assert schemas["EnqueueBody"]["properties"]["type"]["enum"] == app.config["JOB_TYPES"]
    lease = schemas["ClaimBody"]["properties"]["lease_seconds"]["anyOf"][0]
    assert lease["maximum"] == app.config["MAX_LEASE_SECONDS"]
    assert schemas["EnqueueBody"]["additionalProperties"] is False
    assert not any(key.startswith("x-") for key in str(schemas).split("'"))


def test_api_docs_paths_are_not_api_paths() -> None:
    """They are pages, not bearer-token routes: they keep the page session interface."""
    assert not is_api_path("/openapi.json")
    assert not is_api_path("/docs")


def test_docs_page_loads_only_own_files(client: FlaskClient) -> None:
    response = client.get("/docs")
    assert response.status_code == 200
    assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["X-Frame-Options"] == "DENY"
    html = response.get_data(as_text=True)
    assert "<script>" not in html and "style=" not in html
    for src in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert src.startswith("/"), src
        with client.get(src) as asset:
            assert asset.status_code == 200, src


def test_answers_fit_the_response_models(admin: Api, producer: Api, worker: Api) -> None:
    job = producer.enqueue(payload={"to": "x"})
    assert worker.claim() is not None
    JobOut.model_validate(job)
    JobOut.model_validate(admin.get(f"/jobs/{job['id']}").get_json())
    JobList.model_validate(producer.get("/jobs").get_json())
    JobList.model_validate(admin.get("/jobs").get_json())
    EventList.model_validate(admin.get(f"/jobs/{job['id']}/events").get_json())
    ExplanationOut.model_validate(producer.get(f"/jobs/{job['id']}/explain").get_json())
    schedule = {"name": "nightly", "cron": "0 2 * * *", "type": "report.build"}
    ScheduleOut.model_validate(admin.post("/schedules", schedule).get_json())
    ScheduleList.model_validate(admin.get("/schedules").get_json())
    TypeList.model_validate(admin.get("/types").get_json())


def test_operations_answers_fit_their_description(client: FlaskClient, admin: Api) -> None:
    admin.enqueue()
    AuditEvents.model_validate(admin.get("/audit?limit=5").get_json())
    metrics = _document(client)["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert admin.get("/metrics").mimetype == next(iter(metrics)) == "text/plain"
    parameters = _document(client)["paths"]["/audit"]["get"]["parameters"]
    assert [p["name"] for p in parameters] == list(AuditQuery.model_fields)


@pytest.mark.parametrize(
    "text", ['{"type": "email.send"', '{"a": 1,}', '\n\n   {"secret-token-x": tru}', "[1 2]"]
)
def test_parse_errors_do_not_echo_positions(producer: Api, text: str) -> None:
    """Issue 12 finding 13: the parser's line/column/char stay out of the problem."""
    response = producer.post("/jobs", data=text, headers={"Content-Type": "application/json"})
    problem = assert_problem(response, 400)
    assert problem["detail"] == "malformed JSON"
    assert not re.search(r"line|column|char", response.get_data(as_text=True))


def test_nested_error_keys_reach_the_problem(producer: Api) -> None:
    response = producer.post("/jobs", {"type": "email.send", "payload": {"a": "\x00"}})
    assert assert_problem(response, 422)["errors"] == {
        "payload": "strings must not contain NUL characters"
    }


def test_the_job_documents_its_progress_message(client: FlaskClient) -> None:
    job = client.get("/openapi.json").get_json()["components"]["schemas"]["JobOut"]
    assert "progress_message" in job["properties"] and "progress_message" in job["required"]


def _schema(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][
            schema["$ref"].removeprefix("#/components/schemas/")
        ]
    return schema


def _assert_documented(
    document: dict[str, Any], schema: dict[str, Any], value: Any, at: str
) -> None:
    """Every object in ``value`` has the keys its schema lists, in the schema's order: the
    required ones, and only those of the optional ones it was given."""
    schema = _schema(document, schema)
    if "anyOf" in schema:  # one of the options must fit
        misfits = []
        for option in schema["anyOf"]:
            try:
                return _assert_documented(document, option, value, at)
            except AssertionError as exc:
                misfits.append(str(exc))
        raise AssertionError(f"{at}: no option fits: {misfits}")
    if isinstance(value, list):
        assert schema.get("type") == "array", at
        for index, item in enumerate(value):
            _assert_documented(document, schema["items"], item, f"{at}[{index}]")
    elif isinstance(value, dict):
        assert schema.get("type") == "object", at
        if "properties" in schema:
            properties = list(schema["properties"])
            assert list(value) == [name for name in properties if name in value], at
            assert set(schema.get("required", ())) <= set(value) <= set(properties), at
            for name, item in value.items():
                _assert_documented(document, schema["properties"][name], item, f"{at}.{name}")
    else:
        assert schema.get("type") != "object" and "properties" not in schema, at


def test_a_job_answer_sends_the_job_schema_in_order(
    client: FlaskClient, admin: Api, producer: Api, worker: Api
) -> None:
    """Drift between the models that write the answers and the document fails here."""
    job_schema = _document(client)["components"]["schemas"]["JobOut"]
    every, required = list(job_schema["properties"]), job_schema["required"]
    assert every == [*required, "error", "secrets", "parents", "duplicate"]
    job = producer.enqueue(secrets={"api_key": "k"})
    assert list(producer.get(f"/jobs/{job['id']}").get_json()) == required
    assert list(admin.get(f"/jobs/{job['id']}").get_json()) == [*required, "error"]
    claimed = worker.claim()
    assert claimed is not None and list(claimed) == [*required, "secrets"]
    producer.enqueue(unique_key="u")
    duplicate = producer.post("/jobs", {"type": "email.send", "unique_key": "u"}).get_json()
    assert list(duplicate) == [*required, "duplicate"]
    many = admin.post("/jobs/claim", {"max_jobs": 5}).get_json()
    assert list(many) == ["jobs"] and list(many["jobs"][0]) == [*required, "error"]


def test_answers_send_their_documented_keys_in_order(
    client: FlaskClient, admin: Api, producer: Api, worker: Api
) -> None:
    document = _document(client)

    def documented(response: TestResponse, path: str, method: str = "post") -> Any:
        replies = document["paths"][path][method]["responses"]
        schema = replies[str(response.status_code)]["content"]["application/json"]["schema"]
        _assert_documented(document, schema, response.get_json(), f"{method} {path}")
        return response.get_json()

    batch = {"jobs": [{"type": "email.send"}] * 3, "group": {"name": "g"}}
    jobs = documented(producer.post("/jobs/batch", batch), "/jobs/batch")["jobs"]
    job_id = jobs[0]["id"]
    claimed = documented(worker.post("/jobs/claim", {"max_jobs": 2}), "/jobs/claim")["jobs"]
    documented(worker.post("/jobs/claim"), "/jobs/claim")
    beats = [{"id": claimed[0]["id"], "attempt": 1}, {"id": 999, "attempt": 1}]
    documented(worker.post("/jobs/heartbeat", {"jobs": beats}), "/jobs/heartbeat")
    outcomes = [
        {**beats[0], "outcome": "failed", "error": "boom"},
        {**beats[1], "outcome": "completed"},
    ]
    documented(worker.post("/jobs/finish", {"results": outcomes}), "/jobs/finish")
    for caller in (producer, admin):
        documented(caller.get("/jobs"), "/jobs", "get")
        documented(caller.get(f"/jobs/{job_id}/events"), "/jobs/{job_id}/events", "get")
        documented(caller.get(f"/jobs/{job_id}/explain"), "/jobs/{job_id}/explain", "get")
        documented(caller.get(f"/groups/{jobs[0]['group_id']}"), "/groups/{group_id}", "get")
    documented(admin.get("/types"), "/types", "get")
    schedule = {"name": "nightly", "cron": "0 2 * * *", "type": "report.build"}
    created = documented(admin.post("/schedules", schedule), "/schedules")
    documented(admin.get("/schedules"), "/schedules", "get")
    documented(admin.post(f"/schedules/{created['id']}/run"), "/schedules/{schedule_id}/run")
    choice = {"action": "retry", "filter": {}, "reason": "again"}
    preview = documented(admin.post("/jobs/bulk", choice), "/jobs/bulk")
    applied = admin.post("/jobs/bulk", {**choice, "expect_count": preview["count"]})
    documented(applied, "/jobs/bulk")
    documented(admin.get("/audit"), "/audit", "get")
