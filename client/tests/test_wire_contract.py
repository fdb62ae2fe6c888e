"""One wire contract: the client's models and request options against the server's own
``/openapi.json`` (the app under test, in process). Names, types, which fields are always sent
and the defaults must agree; any drift fails here, not in a user's worker."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from datetime import datetime
from typing import Any

import pytest
from queuelog_client import Client, Event, Job, JobType, Schedule
from queuelog_client.client import SCHEDULE_OPTIONS

from app import create_app
from devservers.servers import SECRET

MODELS = {Job: "JobOut", Event: "EventOut", JobType: "TypeOut", Schedule: "ScheduleOut"}


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The components of the document the server serves (no database is read for it)."""
    path = tmp_path_factory.mktemp("contract") / "queuelog.sqlite3"
    app = create_app({"TESTING": True, "SECRET_KEY": SECRET, "DATABASE_URL": f"sqlite:///{path}"})
    response = app.test_client().get("/openapi.json")
    assert response.status_code == 200
    found: dict[str, Any] = response.get_json()["components"]["schemas"]
    return found


def python_type(schema: dict[str, Any]) -> Any:
    """The annotation a client field needs to hold what ``schema`` allows."""
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s != {"type": "null"}]
        assert len(options) == 1 and len(schema["anyOf"]) == 2, schema  # "X or null" only
        return python_type(options[0]) | None
    if "$ref" in schema:
        return dict[str, Any]  # a nested object (e.g. the job's ``trace``): kept as a dict
    kind = schema.get("type")
    if kind == "string":
        return datetime if schema.get("format") == "date-time" else str
    if kind == "array":
        return list[python_type(schema["items"])]  # type: ignore[misc]
    if kind == "object":
        values = schema.get("additionalProperties", True)
        return dict[str, Any] if values is True else dict[str, python_type(values)]  # type: ignore[misc]
    simple = {"integer": int, "boolean": bool, "number": float}
    assert kind in simple, f"no client type for {schema}"
    return simple[kind]


def test_the_type_mapping_tells_apart_what_it_must() -> None:
    """The check below is only as strict as this mapping: a nullable, a timestamp, a map."""
    assert python_type({"type": "integer"}) is int
    assert python_type({"anyOf": [{"type": "string"}, {"type": "null"}]}) == str | None
    assert python_type({"type": "string", "format": "date-time"}) is datetime
    counts = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert python_type(counts) == dict[str, int] != python_type({"type": "object"})


def _fields(model: type) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(model) if f.name != "extra"}


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_each_model_has_the_fields_of_its_response_schema(
    model: type, schemas: dict[str, Any]
) -> None:
    schema = schemas[MODELS[model]]
    fields = _fields(model)
    assert list(fields) == list(schema["properties"]), "names, in the server's order"
    hints = typing.get_type_hints(model)
    for name, field in fields.items():
        prop = schema["properties"][name]
        assert hints[name] == python_type(prop), f"{model.__name__}.{name}: {prop}"
        if name in schema.get("required", []):
            assert _default(field) is dataclasses.MISSING, f"{name} is always sent: no default"
        else:
            assert _default(field) == prop.get("default"), f"{name}: the server's default"


def test_every_model_keeps_fields_a_newer_server_adds() -> None:
    for model in MODELS:
        assert _default(dataclasses.fields(model)[-1]) == {}, model


def _keyword_defaults(function: Any) -> dict[str, Any]:
    parameters = inspect.signature(function).parameters.values()
    return {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY}


def test_the_claim_sends_only_fields_of_the_claim_body(schemas: dict[str, Any]) -> None:
    body = schemas["ClaimBody"]["properties"]
    options = _keyword_defaults(Client.claim)
    options.pop("retries")  # the transport's own setting, never sent
    assert set(options) <= set(body)
    assert options["wait_seconds"] == body["wait_seconds"]["default"]


def test_set_limits_sends_the_fields_of_a_type_change(schemas: dict[str, Any]) -> None:
    assert set(_keyword_defaults(Client.set_limits)) == set(schemas["TypeChange"]["properties"])


def test_create_schedule_takes_the_fields_of_a_new_schedule(schemas: dict[str, Any]) -> None:
    schema = schemas["ScheduleCreate"]
    positional = ["name", "cron", "type", "payload"]
    assert list(inspect.signature(Client.create_schedule).parameters)[1:5] == positional
    assert set(positional) | SCHEDULE_OPTIONS == set(schema["properties"])
    assert set(schema["required"]) <= set(positional)
