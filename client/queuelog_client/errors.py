"""The exceptions the client raises: one per family of RFC 9457 problem, plus network failure."""

from __future__ import annotations

import contextlib
from typing import Any

import httpx


class QueuelogError(Exception):
    """The server refused the request, or could not be reached."""

    def __init__(
        self,
        status: int | None,
        title: str,
        detail: str | None = None,
        errors: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status or 'no answer'} {title}" + (f": {detail}" if detail else ""))
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = errors or {}


class Unreachable(QueuelogError):
    """The server could not be reached (connection refused, timed out, cut) after retries."""


class BadRequest(QueuelogError):
    """400 (and other 4xx without a class of their own): the request was malformed."""


class Unauthorized(QueuelogError):
    """401: the token is missing, unknown, revoked or its user disabled."""


class Forbidden(QueuelogError):
    """403: the token's role may not do this (or the priority is above the caller's cap)."""


class NotFound(QueuelogError):
    """404: no such job, or not visible to the caller."""


class Conflict(QueuelogError):
    """409: the job is not in a state that allows this (finished, cancelled, not yours)."""


class Unprocessable(QueuelogError):
    """422: a field is invalid; ``errors`` maps each field to what is wrong with it."""


class RateLimited(QueuelogError):
    """429: too many requests; retry later."""


class ServerError(QueuelogError):
    """5xx: the server failed or is busy (503), after retries."""


_BY_STATUS: dict[int, type[QueuelogError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Unprocessable,
    429: RateLimited,
}


def error_class(status: int) -> type[QueuelogError]:
    """The exception class for an HTTP error status."""
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, BadRequest)


def from_response(response: httpx.Response) -> QueuelogError:
    """The typed exception for an error response, built from its problem+json body if any."""
    body: Any = None
    with contextlib.suppress(ValueError):  # a proxy's HTML page or an empty body
        body = response.json()
    if not isinstance(body, dict):
        body = {}
    errors = body.get("errors")
    detail = body.get("detail")
    return error_class(response.status_code)(
        response.status_code,
        str(body.get("title") or response.reason_phrase or "error"),
        detail if isinstance(detail, str) else None,
        {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict) else None,
    )
