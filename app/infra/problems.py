"""RFC 9457 problem details: the one shape of every JSON error."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify
from werkzeug.http import HTTP_STATUS_CODES

PROBLEM_TYPE = "about:blank"


def problem(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    errors: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    """A problem+json response (``extra``: members of this kind of problem, RFC 9457 3.2)."""
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE,
        "title": title or HTTP_STATUS_CODES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    body |= extra or {}
    response = jsonify(body)
    response.status_code = status
    response.mimetype = "application/problem+json"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response
