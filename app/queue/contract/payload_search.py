"""The payload search filter (``payload`` in ``GET /jobs``, the jobs page and the bulk filter): a
JSON object of at most 1 KiB that a job's payload must contain, checked the same way wherever it
arrives so that both databases answer it alike."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, PlainValidator, ValidationInfo, WithJsonSchema

from app.queue.contract.request_model import refuse, settings_of
from app.queue.contract.strictjson import MalformedJSON, decode_json, json_value_problem

MAX_SEARCH_BYTES = 1024
# Integers are compared as 64-bit by one of the engines: a wider one could not be matched exactly.
_INT_RANGE = range(-(2**63), 2**63)
_DESCRIPTION = (
    "Jobs whose payload contains this JSON object (containment, as jsonb's `@>`: every key "
    "present with an equal value, recursively for objects; an array contains the listed "
    "elements). At most "
    f"{MAX_SEARCH_BYTES} bytes, integers within 64 bits. Keys named in PAYLOAD_SEARCH_KEYS are "
    "indexed; any other key is read from every job the other filters leave."
)


def canonical(needle: dict[str, Any]) -> str:
    """The filter as the use cases carry it: compact JSON, keys sorted."""
    return json.dumps(needle, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _problem(needle: Any, max_depth: int) -> str | None:
    """Why a decoded value cannot be a payload search, or None."""
    if not isinstance(needle, dict):
        return "must be a JSON object"
    if problem := json_value_problem(needle, max_depth):
        return problem
    if len(canonical(needle).encode()) > MAX_SEARCH_BYTES:
        return f"must be at most {MAX_SEARCH_BYTES} bytes of JSON"
    stack: list[Any] = [needle]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool) and item not in _INT_RANGE:
            return "integers must fit in 64 bits"
    return None


def decode_needle(text: str, max_depth: int) -> dict[str, Any]:
    """The JSON object ``text`` holds, checked; ValueError saying what is wrong with it."""
    if len(text.encode(errors="replace")) > MAX_SEARCH_BYTES:
        raise ValueError(f"must be at most {MAX_SEARCH_BYTES} bytes of JSON")
    try:
        needle = decode_json(text, max_depth)
    except MalformedJSON as exc:
        raise ValueError(f"must be a JSON object: {exc}") from None
    if problem := _problem(needle, max_depth):
        raise ValueError(problem)
    decoded: dict[str, Any] = needle
    return decoded


def _from_text(value: Any, info: ValidationInfo) -> str:
    """The query string's JSON text, checked, as ``canonical`` text."""
    if not isinstance(value, str):
        raise refuse("must be a JSON object")
    try:
        return canonical(decode_needle(value, settings_of(info).max_json_depth))
    except ValueError as exc:
        raise refuse(str(exc)) from None


def _from_object(value: Any, info: ValidationInfo) -> str:
    """A JSON body's decoded object, checked, as ``canonical`` text."""
    if problem := _problem(value, settings_of(info).max_json_depth):
        raise refuse(problem)
    return canonical(value)


PayloadQuery = Annotated[
    str,
    PlainValidator(_from_text),
    WithJsonSchema({"type": "string", "maxLength": MAX_SEARCH_BYTES, "examples": ['{"a":1}']}),
    Field(description=_DESCRIPTION + " URL-encoded JSON text."),
]
PayloadObject = Annotated[
    str,
    PlainValidator(_from_object),
    WithJsonSchema({"type": "object"}),
    Field(description=_DESCRIPTION),
]
