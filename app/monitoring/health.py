"""Liveness and readiness for load balancers: no authentication, and nothing revealed."""

from __future__ import annotations

import logging

from flask import Blueprint, Response, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.infra import access, db
from app.infra.problems import problem
from app.storage import migrate

bp = Blueprint("health", __name__)
log = logging.getLogger(__name__)
NOT_READY = "the service is not ready"


@bp.get("/healthz")
@access.mark(access.PUBLIC)
def healthz() -> Response:
    """The process answers; the database is not touched."""
    return jsonify({"status": "ok"})


@bp.get("/readyz")
@access.mark(access.PUBLIC)
def readyz() -> Response:
    """Ready when the database answers and its schema is at the latest revision."""
    try:
        with db.read() as conn:
            revisions = {
                row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))
            }
    except SQLAlchemyError as exc:
        log.warning("not ready: %s", type(exc).__name__)
        return problem(503, NOT_READY, headers={"Retry-After": "5"})
    if revisions != {migrate.HEAD}:
        log.warning("not ready: the schema is not at the latest revision")
        return problem(503, NOT_READY, headers={"Retry-After": "5"})
    return jsonify({"status": "ready"})
