"""Strict JSON request bodies: the media type, UTF-8, and the strict decoding rules."""

from __future__ import annotations

from typing import Any

from flask import Request

from app.queue.contract.strictjson import MalformedJSON, decode_json


class BadBody(Exception):
    """The request body cannot be read as the JSON object the route expects."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def json_object(request: Request, *, max_depth: int, optional: bool = False) -> dict[str, Any]:
    """The request's JSON object body; ``optional`` lets an empty body stand for ``{}``."""
    raw = request.get_data(cache=True)
    if optional and not raw.strip():
        return {}
    if request.mimetype != "application/json":
        raise BadBody(415, "the body must be JSON sent as Content-Type: application/json")
    try:
        value = decode_json(raw.decode("utf-8"), max_depth)
    except UnicodeDecodeError:
        raise BadBody(400, "the body is not valid UTF-8") from None
    except MalformedJSON as exc:
        raise BadBody(400, str(exc)) from None
    if not isinstance(value, dict):
        raise BadBody(400, "the body must be a JSON object")
    return value
