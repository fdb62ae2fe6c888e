"""App-wide error handlers: problem+json for API callers, an HTML page for people, and
503 with Retry-After (never a 500) when the database stays busy."""

from __future__ import annotations

import logging

from flask import Flask, render_template, request
from flask.typing import ResponseReturnValue
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException, InternalServerError

from app.infra.problems import problem
from app.infra.security import is_api_path

log = logging.getLogger(__name__)
BUSY_RETRY_AFTER = "1"


def wants_json() -> bool:
    """API routes and clients that prefer JSON get problem details; browsers get pages."""
    if request.blueprint == "api" or is_api_path(request.path):
        return True
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


def _respond(
    status: int, detail: str, headers: dict[str, str] | None = None
) -> ResponseReturnValue:
    if wants_json():
        return problem(status, detail, headers=headers)
    # A server error may come from the database that the signed-in user's header would read.
    body = render_template("error.html", status=status, detail=detail, bare=status >= 500)
    return body, status, headers or {}


def init_app(app: Flask) -> None:
    """Register the handlers."""

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> ResponseReturnValue:
        headers = {k: v for k, v in exc.get_headers() if k.lower() != "content-type"}
        return _respond(exc.code or 500, exc.description or exc.name, headers)

    @app.errorhandler(OperationalError)
    def database_busy(exc: OperationalError) -> ResponseReturnValue:
        if "locked" in str(exc.orig).lower() or "busy" in str(exc.orig).lower():
            log.warning("database busy: %s", exc.orig)
            return _respond(
                503, "the database is busy; retry shortly", {"Retry-After": BUSY_RETRY_AFTER}
            )
        log.exception("database error")
        return _respond(500, InternalServerError.description)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> ResponseReturnValue:
        log.exception("unhandled error")
        return _respond(500, InternalServerError.description)
