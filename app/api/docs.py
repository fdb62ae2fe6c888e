"""The API describes itself: GET /openapi.json (generated) and GET /docs (a reference page).
Both are public: they hold no data, only what every client may send and receive."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, render_template

from app.api.openapi import build
from app.infra import access
from app.infra.queue_settings import queue_settings

bp = Blueprint("apidocs", __name__)
EXTENSION_KEY = "queuelog.openapi"
DESCRIPTION = (
    "The JSON API of queuelog, a persistent background-job queue. Every route needs "
    "`Authorization: Bearer <token>`; what a caller may do depends on its role (producer, "
    "worker, admin). Request bodies must be `application/json` objects (415 otherwise); "
    "malformed JSON, NaN/Infinity, duplicate keys or nesting deeper than MAX_JSON_DEPTH are "
    "400; a body over MAX_CONTENT_LENGTH is 413; unknown fields are 422. Errors are RFC 9457 "
    "problem details (`application/problem+json`)."
)


def document() -> dict[str, Any]:
    """The current app's OpenAPI document, built once (routes and settings are fixed)."""
    extensions = current_app.extensions
    if EXTENSION_KEY not in extensions:
        extensions[EXTENSION_KEY] = build(
            current_app, queue_settings(), title="queuelog JSON API", description=DESCRIPTION
        )
    return extensions[EXTENSION_KEY]  # type: ignore[no-any-return]


@bp.get("/openapi.json")
@access.mark(access.PUBLIC)
def openapi() -> Response:
    return jsonify(document())


@bp.get("/docs")
@access.mark(access.PUBLIC)
def docs() -> str:
    return render_template("api/docs.html")
