"""Property-based fuzzing of the JSON API against the document it serves (schemathesis,
in-process).

schemathesis reads the generated ``GET /openapi.json`` from the app itself, generates
schema-valid and schema-invalid requests for each documented operation, and sends them straight
to the real Flask app over WSGI (no server), on the test's own migrated SQLite file, with a real
bearer token. Every built-in check runs on every response, among them:

- ``not_a_server_error``: never a 5xx;
- ``status_code_conformance``: only the status codes the operation documents;
- ``content_type_conformance``: the documented media type (JSON or problem+json);
- ``response_schema_conformance``: the body matches the documented job / problem schema;
- ``response_headers_conformance``: ``Location`` on 201, ``WWW-Authenticate`` on 401;
- ``negative_data_rejection``: a schema-invalid request is a 4xx;
- ``positive_data_acceptance``: a schema-valid request is not refused as invalid;
- ``ignored_auth``: the same request without the token is a 401;
- ``unsupported_method``: undocumented methods are 405.

One database serves a whole test, so jobs created by ``POST /jobs`` are there to be fetched,
claimed, completed, cancelled and retried by the other operations' random ids. The last tests pin
what the fuzzer found, as plain examples.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.api.conftest import assert_problem
from tests.builders import Api

SPEC = "/openapi.json"
MAX_EXAMPLES = 8

# Rules that JSON Schema cannot state: an idempotency key repeated with a different request, or
# a body key that differs from the Idempotency-Key header, is 422; a cursor the server did not
# issue is 422; a cron expression or a time zone is checked beyond its length; an audit date
# that fits the pattern but not the calendar (month 13) is 422. So schema-valid requests to
# these operations (a batch holds enqueue bodies) may meet a 422; every other schema-valid
# request must not.
_CROSS_FIELD_OPERATIONS = [
    ("POST", "/jobs"),
    ("POST", "/jobs/batch"),
    ("GET", "/jobs"),
    ("POST", "/schedules"),
    ("PATCH", "/schedules/{schedule_id}"),
    ("GET", "/audit"),
]
_CROSS_FIELD_RULES = "".join(
    f"""
[[operations]]
include-method = "{method}"
include-path = "{path}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]
"""
    for method, path in _CROSS_FIELD_OPERATIONS
)


def _config(*, coverage: bool) -> SchemathesisConfig:
    """A fixed seed for reproducible CI runs; the coverage phase adds boundary and type cases."""
    return SchemathesisConfig.from_str(
        f"""
seed = 20260131

[phases.examples]
enabled = false

[phases.coverage]
enabled = {str(coverage).lower()}

[phases.fuzzing]
enabled = true
{_CROSS_FIELD_RULES}
"""
    )


def filter_query(context: Any, query: dict[str, Any] | None) -> bool:
    """Drop query strings with an object or empty list for a value: they go on the wire as
    ``name=`` or not at all, which this spec allows, yet schemathesis would still judge the case
    as invalid input that the app should have refused."""
    return not any(isinstance(v, dict) or v == [] for v in (query or {}).values())


SHORT_WAIT = 0.05


def map_body(context: Any, body: Any) -> Any:
    """Cap a long-poll's ``wait_seconds`` at a few milliseconds: a valid 30 s wait on an empty
    queue is correct behaviour (204 after the wait) but would stall the run. Invalid values
    (negative, too large, not a number) are left for the negative cases."""
    if isinstance(body, dict):
        wait = body.get("wait_seconds")
        if type(wait) in (int, float) and SHORT_WAIT < wait <= 30:
            return {**body, "wait_seconds": SHORT_WAIT}
    return body


def map_query(context: Any, query: dict[str, Any] | None) -> dict[str, Any] | None:
    """The same for a wait for a job's outcome (``GET /jobs/{id}?wait_seconds=``): a valid wait
    on a running job is correct behaviour but would stall the run; it becomes no wait."""
    wait = (query or {}).get("wait_seconds")
    if type(wait) is int and 0 < wait <= 30:
        return {**(query or {}), "wait_seconds": 0}
    return query


def _load(app: Flask, config: SchemathesisConfig) -> OpenApiSchema:
    """The served document; requests go to ``app`` in-process (the WSGI transport)."""
    schema = schemathesis.openapi.from_wsgi(SPEC, app, config=config)
    schema.hook(filter_query)
    schema.hook(map_body)
    schema.hook(map_query)
    return schema


@pytest.fixture
def backend() -> str:
    """SQLite only (the folder runs on PostgreSQL too): fuzzing both would double the run time."""
    return "sqlite"


@pytest.fixture
def admin_schema(app: Flask) -> OpenApiSchema:
    """Boundary cases (coverage phase) and random ones (fuzzing phase)."""
    return _load(app, _config(coverage=True))


@pytest.fixture
def producer_schema(app: Flask) -> OpenApiSchema:
    """Random cases only: the admin run already walks every field's boundaries."""
    return _load(app, _config(coverage=False))


FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    # `app` and the token callers are function-scoped on purpose: one database per test, shared
    # by all its examples, so later operations meet the jobs earlier ones created.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.mark.slow
@FUZZ_SETTINGS
@schemathesis.pytest.from_fixture("admin_schema").parametrize()
def test_admin_requests_follow_the_contract(case: schemathesis.Case, admin: Api) -> None:
    case.call_and_validate(headers=admin.headers())


@pytest.mark.slow
@FUZZ_SETTINGS
@schemathesis.pytest.from_fixture("producer_schema").parametrize()
def test_producer_requests_follow_the_contract(case: schemathesis.Case, producer: Api) -> None:
    response = case.call_and_validate(headers=producer.headers())
    if response.status_code in (200, 201):
        assert_no_error_field(response.json())


def assert_no_error_field(body: dict[str, Any]) -> None:
    """Only admins see the ``error`` of a job or an event."""
    items = body.get("jobs", body.get("events", [body]))
    assert all("error" not in item for item in items), body


def test_search_with_non_ascii_digits_is_not_a_server_error(admin: Api) -> None:
    """Found by the fuzzer: ``"¹6".isdigit()`` is true but ``int("¹6")`` raises (was a 500)."""
    job = admin.enqueue(idempotency_key="order-1")
    for q in ("\u00b96", "\u0663", "\uff11"):  # superscript one, Arabic-Indic three, fullwidth one
        response = admin.get("/jobs", query_string={"q": q})
        assert response.status_code == 200, response.get_data()[:300]
        assert response.get_json()["jobs"] == []
    assert [j["id"] for j in admin.get("/jobs?q=1").get_json()["jobs"]] == [job["id"]]


@pytest.mark.parametrize("name", ["status", "type", "priority", "limit", "cursor", "q"])
def test_a_repeated_filter_is_refused(admin: Api, name: str) -> None:
    """Found by the fuzzer: ``?status=pending&status=failed`` silently used the first value."""
    admin.enqueue()
    values = {"status": "pending", "type": "email.send", "priority": "low", "limit": "5"}
    value = values.get(name, "")
    response = admin.get("/jobs", query_string=[(name, value), (name, value)])
    body = assert_problem(response, 422)
    assert body["errors"] == {name: "must be given at most once"}
