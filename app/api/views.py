"""JSON routes: parse the request, call the job service in a transaction, shape the answer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Blueprint, Response, current_app, g, jsonify, request, url_for

from app import db, ticks
from app.api import body
from app.api import schedules as schedules_api
from app.api.auth import Unauthorized, authenticate
from app.api.problems import problem
from app.queue import explain, service, validate
from app.queue.errors import InvalidInput, QueueError
from app.queue.models import Job
from app.settings import queue_settings
from app.timeutil import utcnow

bp = Blueprint("api", __name__)
bp.register_blueprint(schedules_api.bp)


# The action each route performs, checked against the role table before the body is read.
_ACTIONS = {
    "api.enqueue": service.Action.ENQUEUE,
    "api.claim": service.Action.WORK,
    "api.complete": service.Action.WORK,
    "api.fail": service.Action.WORK,
    "api.heartbeat": service.Action.WORK,
    "api.cancel": service.Action.CANCEL,
    "api.retry": service.Action.RETRY,
}


@bp.before_request
def require_token() -> None:
    """Every API route needs a valid bearer token, and the role its action needs."""
    actor = authenticate()
    if action := _ACTIONS.get(request.endpoint or ""):
        service.authorize(actor, action)


@bp.errorhandler(Unauthorized)
def unauthorized(exc: Unauthorized) -> Response:
    return problem(401, str(exc), headers={"WWW-Authenticate": "Bearer"})


@bp.errorhandler(body.BadBody)
def bad_body(exc: body.BadBody) -> Response:
    return problem(exc.status, exc.detail)


@bp.errorhandler(QueueError)
def queue_error(exc: QueueError) -> Response:
    errors = getattr(exc, "errors", None)
    return problem(exc.status, exc.detail, title=exc.title, errors=errors)


def _body(*, optional: bool = False) -> dict[str, Any]:
    return body.json_object(
        request, max_depth=current_app.config["MAX_JSON_DEPTH"], optional=optional
    )


def _job(job: Job, status: int = 200) -> Response:
    response = jsonify(job.as_json(include_error=g.actor.sees_errors))
    response.status_code = status
    return response


@bp.post("/jobs")
def enqueue() -> Response:
    data = _body()
    request_ = validate.parse_enqueue(
        data, queue_settings(), header_key=request.headers.get("Idempotency-Key")
    )
    with db.transaction() as conn:
        job, created = service.enqueue(conn, g.actor, request_, now=utcnow())
    response = _job(job, 201 if created else 200)
    response.headers["Location"] = url_for("api.get_job", job_id=job.id)
    return response


@bp.get("/jobs")
def list_jobs() -> Response:
    filters = validate.parse_filters(request.args)
    with db.read() as conn:
        page = service.list_jobs(conn, g.actor, filters)
    return jsonify(
        {
            "jobs": [job.as_json(include_error=g.actor.sees_errors) for job in page.jobs],
            "next_cursor": page.next_cursor,
        }
    )


@bp.get("/jobs/<id:job_id>")
def get_job(job_id: int) -> Response:
    with db.read() as conn:
        job = service.get_job(conn, g.actor, job_id)
    return _job(job)


@bp.get("/jobs/<id:job_id>/events")
def job_events(job_id: int) -> Response:
    with db.read() as conn:
        events = service.list_events(conn, g.actor, job_id)
    return jsonify({"events": [e.as_json(include_error=g.actor.sees_errors) for e in events]})


@bp.get("/jobs/<id:job_id>/explain")
def explain_job(job_id: int) -> Response:
    idle = timedelta(seconds=current_app.config["EXPLAIN_IDLE_WORKER_SECONDS"])
    with db.read() as conn:
        found = explain.explain(conn, g.actor, job_id, now=utcnow(), idle_after=idle)
    return jsonify(found.as_json())


@bp.post("/jobs/claim")
def claim() -> Response:
    ticks.on_claim()
    settings = queue_settings()
    lease = validate.parse_claim(_body(optional=True), settings)
    with db.transaction() as conn:
        job = service.claim(conn, g.actor, now=utcnow(), settings=settings, lease_seconds=lease)
    if job is None:
        return Response(status=204)
    return _job(job)


@bp.post("/jobs/<id:job_id>/complete")
def complete(job_id: int) -> Response:
    result, attempt = validate.parse_complete(_body(optional=True), queue_settings())
    with db.transaction() as conn:
        job = service.complete(conn, g.actor, job_id, now=utcnow(), result=result, attempt=attempt)
    return _job(job)


@bp.post("/jobs/<id:job_id>/fail")
def fail(job_id: int) -> Response:
    error, attempt, retry_in, retryable = validate.parse_fail(_body())
    with db.transaction() as conn:
        job = service.fail(
            conn,
            g.actor,
            job_id,
            now=utcnow(),
            settings=queue_settings(),
            error=error,
            attempt=attempt,
            retry_in=retry_in,
            retryable=retryable,
        )
    return _job(job)


@bp.post("/jobs/<id:job_id>/heartbeat")
def heartbeat(job_id: int) -> Response:
    progress, message, attempt = validate.parse_heartbeat(_body(optional=True))
    with db.transaction() as conn:
        job = service.heartbeat(
            conn,
            g.actor,
            job_id,
            now=utcnow(),
            settings=queue_settings(),
            progress=progress,
            message=message,
            attempt=attempt,
        )
    return _job(job)


def _no_fields() -> None:
    if data := _body(optional=True):
        raise InvalidInput({name: "unknown field" for name in data})


@bp.post("/jobs/<id:job_id>/cancel")
def cancel(job_id: int) -> Response:
    _no_fields()
    with db.transaction() as conn:
        job = service.cancel(conn, g.actor, job_id, now=utcnow())
    return _job(job)


@bp.post("/jobs/<id:job_id>/retry")
def retry(job_id: int) -> Response:
    _no_fields()
    with db.transaction() as conn:
        job = service.retry(conn, g.actor, job_id, now=utcnow())
    return _job(job)
