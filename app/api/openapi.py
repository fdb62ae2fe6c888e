"""The API's OpenAPI 3.1 document, generated from the routes' own descriptions (``documented``)
and the request and response models."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any, TypeVar

from flask import Flask
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from app.queue.contract.fields import JOB_TYPES_MARK, MAX_BATCH_MARK, MAX_LEASE_MARK
from app.queue.contract.job_responses import Problem, ValidationProblem
from app.queue.contract.request_model import RequestModel
from app.queue.rules.settings import QueueSettings

View = TypeVar("View", bound=Callable[..., Any])
SCHEMAS = "#/components/schemas/"
_PLACEHOLDER = re.compile(r"<(?:(\w+):)?(\w+)>")
# The schema of each URL converter's values (``id``: app.infra.routing.RowIdConverter).
_CONVERTERS: dict[str | None, dict[str, Any]] = {
    "id": {"type": "integer", "minimum": 0, "maximum": 10**18 - 1},
    "int": {"type": "integer", "minimum": 0},
    None: {"type": "string", "minLength": 1, "pattern": "^[^/]+$"},  # the default converter
}


@dataclass(frozen=True)
class ResponseDoc:
    """One documented answer: a description, a body model (None: no body, or text of the
    ``text`` media type), headers."""

    description: str
    model: type[BaseModel] | None = None
    headers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    text: str | None = None


@dataclass(frozen=True)
class Operation:
    """What a route says about itself. ``body_required=False``: an empty body stands for
    ``{}``. ``problems``: the statuses of the problems the route answers beyond the common ones
    (401 and 503 everywhere; 400, 413, 415, 422 with a body; 422 with a query), each described
    by a text, or by a ``ResponseDoc`` whose model extends ``Problem``."""

    summary: str
    responses: Mapping[int, ResponseDoc]
    body: type[BaseModel] | None = None
    body_required: bool = True
    query: type[RequestModel] | None = None
    headers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    problems: Mapping[int, str | ResponseDoc] = field(default_factory=dict)
    description: str | None = None


def documented(operation: Operation) -> Callable[[View], View]:
    """Attach ``operation`` to a view, so the document describes the route where it is defined.
    Put it under the route decorator."""

    def attach(view: View) -> View:
        view.openapi = operation  # type: ignore[attr-defined]
        return view

    return attach


_COMMON_PROBLEMS = {
    401: "Missing, invalid or revoked token",
    503: "The database stayed locked; retry (see Retry-After)",
}
_BODY_PROBLEMS = {
    400: "The body is not UTF-8 JSON, is not an object, has duplicate keys or NaN/Infinity, "
    "or nests too deep",
    413: "The request body is over MAX_CONTENT_LENGTH",
    415: "A non-empty body that is not sent as application/json",
    422: "Invalid fields (see `errors`)",
}
_PROBLEM_HEADERS = {
    401: {
        "WWW-Authenticate": {"required": True, "schema": {"type": "string", "pattern": "^Bearer"}}
    },
    503: {"Retry-After": {"required": True, "schema": {"type": "string"}}},
}


Found = list[tuple[str, str, str, Operation]]


def _operations(app: Flask) -> tuple[Found, dict[str, list[dict[str, Any]]]]:
    """``(path, method, endpoint, operation)`` for every documented route, in URL map order,
    and the path parameters of each path."""
    found: Found = []
    path_parameters: dict[str, list[dict[str, Any]]] = {}
    for rule in app.url_map.iter_rules():
        operation = getattr(app.view_functions[rule.endpoint], "openapi", None)
        if operation is None:
            continue
        path = _PLACEHOLDER.sub(r"{\2}", rule.rule)
        path_parameters[path] = [
            {"name": name, "in": "path", "required": True, "schema": _CONVERTERS[converter or None]}
            for converter, name in _PLACEHOLDER.findall(rule.rule)
        ]
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((path, method.lower(), rule.endpoint, operation))
    return found, path_parameters


def _models(operations: Found) -> list[type[BaseModel]]:
    models: dict[str, type[BaseModel]] = {
        "Problem": Problem,
        "ValidationProblem": ValidationProblem,
    }
    for *_, op in operations:
        problems = [p.model for p in op.problems.values() if isinstance(p, ResponseDoc)]
        for model in (op.body, op.query, *(r.model for r in op.responses.values()), *problems):
            if model is not None:
                models[model.__name__] = model
    return list(models.values())


def _json(ref: dict[str, Any], media: str = "application/json") -> dict[str, Any]:
    return {"content": {media: {"schema": ref}}}


def _query_parameters(schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each property of a query model as a query parameter (``null``: the parameter left out)."""
    parameters = []
    for name, prop in schema["properties"].items():
        options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
        chosen = options[0] if len(options) == 1 else prop
        value = {k: v for k, v in chosen.items() if k not in ("title", "description")}
        parameter = {"name": name, "in": "query", "allowEmptyValue": True, "schema": value}
        if description := prop.get("description") or chosen.get("description"):
            parameter["description"] = description
        parameters.append(parameter)
    return parameters


def _with_settings(node: Any, settings: QueueSettings) -> Any:
    """The schema with the marks of configured values replaced by the values."""
    if isinstance(node, list):
        return [_with_settings(item, settings) for item in node]
    if not isinstance(node, dict):
        return node
    result = {k: _with_settings(v, settings) for k, v in node.items() if not k.startswith("x-")}
    if node.get(JOB_TYPES_MARK):
        result["enum"] = list(settings.job_types)
    if node.get(MAX_LEASE_MARK):
        result["maximum"] = settings.max_lease_seconds
    if node.get(MAX_BATCH_MARK):
        result["maxItems"] = settings.max_batch
    return result


def _operation(endpoint: str, op: Operation, refs: Mapping[type[BaseModel], Any]) -> dict[str, Any]:
    problem, invalid = refs[Problem], refs[ValidationProblem]
    statuses: dict[int, str | ResponseDoc] = dict(_COMMON_PROBLEMS)
    if op.body is not None:
        statuses |= _BODY_PROBLEMS
    if op.query is not None:
        statuses[422] = _BODY_PROBLEMS[422]
    statuses |= op.problems
    responses: dict[str, Any] = {}
    for status, spec in op.responses.items():
        entry: dict[str, Any] = {"description": spec.description}
        if spec.model is not None:
            entry |= _json(refs[spec.model])
        elif spec.text is not None:
            entry |= _json({"type": "string"}, spec.text)
        if spec.headers:
            entry["headers"] = dict(spec.headers)
        responses[str(status)] = entry
    for status, described in sorted(statuses.items()):
        schema = invalid if status == 422 else problem
        if isinstance(described, ResponseDoc):
            schema = refs[described.model] if described.model else schema
            described = described.description
        media = _json(schema, "application/problem+json")
        responses[str(status)] = {"description": described, **media}
        if status in _PROBLEM_HEADERS:
            responses[str(status)]["headers"] = _PROBLEM_HEADERS[status]
    document: dict[str, Any] = {
        "operationId": endpoint.rpartition(".")[2],
        "summary": op.summary,
        "responses": responses,
    }
    if op.description:
        document["description"] = op.description
    parameters = [
        {"name": name, "in": "header", "required": False, "schema": dict(schema)}
        for name, schema in op.headers.items()
    ]
    if op.query is not None:
        parameters += _query_parameters(refs[op.query])
    if parameters:
        document["parameters"] = parameters
    if op.body is not None:
        document["requestBody"] = {"required": op.body_required, **_json(refs[op.body])}
    return document


def build(app: Flask, settings: QueueSettings, *, title: str, description: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``app``'s documented routes."""
    operations, path_parameters = _operations(app)
    models = _models(operations)
    keyed, definitions = models_json_schema(
        [(model, "validation") for model in models], ref_template=SCHEMAS + "{model}"
    )
    components = _with_settings(definitions.get("$defs", {}), settings)
    refs: dict[type[BaseModel], Any] = {model: keyed[(model, "validation")] for model in models}
    # Query models are inlined as parameters, so they need their properties, not a reference.
    for *_, op in operations:
        if op.query is not None:
            refs[op.query] = components.pop(refs[op.query]["$ref"].removeprefix(SCHEMAS))
    paths: dict[str, dict[str, Any]] = {}
    for path, method, endpoint, op in operations:
        entry = paths.setdefault(path, {})
        entry[method] = _operation(endpoint, op, refs)
        if path_parameters[path]:
            entry["parameters"] = path_parameters[path]
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version("queuelog"), "description": description},
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token: `flask --app app token create NAME`.",
                }
            },
        },
    }
