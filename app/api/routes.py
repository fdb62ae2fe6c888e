"""The JSON API's one blueprint: what every API route shares (the bearer token, its problem
answers, the per-token rate limit) and, nested in it, the blueprint of each route module."""

from __future__ import annotations

from flask import Blueprint, Response

from app.api import auth, body
from app.api.batches import bp as batches_bp
from app.api.bulk import bp as bulk_bp
from app.api.groups import bp as groups_bp
from app.api.logs import bp as logs_bp
from app.api.ops import bp as ops_bp
from app.api.reports import bp as reports_bp
from app.api.schedules import bp as schedules_bp
from app.api.types import bp as types_bp
from app.api.views import bp as jobs_bp
from app.infra.problems import problem
from app.infra.ratelimit import api_limit
from app.queue.vocabulary.errors import QueueError

bp = Blueprint("api", __name__)
ROUTES = (
    jobs_bp,
    batches_bp,
    reports_bp,
    logs_bp,
    bulk_bp,
    groups_bp,
    schedules_bp,
    types_bp,
    ops_bp,
)
for routes in ROUTES:
    bp.register_blueprint(routes)
api_limit(bp)  # API_RATE_LIMIT, one bucket per token across every API route


@bp.before_request
def require_token() -> None:
    """Every API route needs a valid bearer token: each route's transaction authenticates it
    and checks the action the route declares with ``auth.requires``."""
    auth.read_credential()


@bp.errorhandler(auth.Unauthorized)
def unauthorized(exc: auth.Unauthorized) -> Response:
    return problem(401, str(exc), headers={"WWW-Authenticate": "Bearer"})


@bp.errorhandler(body.BadBody)
def bad_body(exc: body.BadBody) -> Response:
    return problem(exc.status, exc.detail)


@bp.errorhandler(QueueError)
def queue_error(exc: QueueError) -> Response:
    return problem(exc.status, exc.detail, title=exc.title, errors=exc.errors)
