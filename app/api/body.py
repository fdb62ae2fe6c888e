"""Strict JSON request bodies: the media type, duplicate keys, NaN, depth and shape."""

from __future__ import annotations

import json
from typing import Any

from flask import Request


class BadBody(Exception):
    """The request body cannot be read as the JSON object the route expects."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise BadBody(400, f"duplicate key {key!r} in JSON object")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise BadBody(400, f"{name} is not valid JSON")


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def json_object(request: Request, *, max_depth: int, optional: bool = False) -> dict[str, Any]:
    """The request's JSON object body; ``optional`` lets an empty body stand for ``{}``."""
    raw = request.get_data(cache=True)
    if optional and not raw.strip():
        return {}
    if request.mimetype != "application/json":
        raise BadBody(415, "the body must be JSON sent as Content-Type: application/json")
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except UnicodeDecodeError:
        raise BadBody(400, "the body is not valid UTF-8") from None
    except RecursionError:
        raise BadBody(400, f"JSON nests deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise BadBody(400, f"malformed JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadBody(400, "the body must be a JSON object")
    if _depth(value) > max_depth:
        raise BadBody(400, f"JSON nests deeper than {max_depth} levels")
    return value
