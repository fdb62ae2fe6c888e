"""JSON routes of attempt logs: the worker holding an attempt appends lines; admins read them
(``app.queue.usecases.attempt_logs``)."""

from __future__ import annotations

from flask import Blueprint, Response, g

from app.api.auth import requires
from app.api.openapi import Operation, ResponseDoc, documented
from app.api.respond import respond
from app.api.views import NOT_FOUND, ROLE, WORK_PROBLEMS, parse_body
from app.infra import db
from app.queue.contract.logs import JobLogs, LogsAppended, LogsBody, appended_out, logs_out
from app.queue.rules.policy import Action
from app.queue.usecases import attempt_logs
from app.queue.vocabulary.timeutil import utcnow

bp = Blueprint("logs", __name__)


@bp.post("/jobs/<id:job_id>/logs")
@requires(Action.WORK)
@documented(
    Operation(
        summary="Append lines to the log of the attempt the caller holds (its worker)",
        description="Refused as a heartbeat is: 404 for a job that does not exist, 409 when the "
        "caller does not hold that attempt (another worker's, a stale attempt, a finished job). "
        "Each line is sanitized of credentials, as errors are, before it is stored.",
        body=LogsBody,
        body_required=True,
        responses={200: ResponseDoc("What was stored", LogsAppended)},
        problems=WORK_PROBLEMS,
    )
)
def append_logs(job_id: int) -> Response:
    body = parse_body(LogsBody)
    with db.transaction() as conn:
        appended = attempt_logs.append(
            conn, g.actor, job_id, attempt=body.attempt, lines=body.lines, now=utcnow()
        )
    return respond(appended_out(appended))


@bp.get("/jobs/<id:job_id>/logs")
@requires(Action.READ_LOGS)
@documented(
    Operation(
        summary="A job's attempt logs, per attempt (admins)",
        description="Admins only, like error texts: any other role gets 403 whatever the job, "
        "so the answer tells nothing of a job's logs, nor whether it exists.",
        responses={200: ResponseDoc("The lines each attempt kept, oldest first", JobLogs)},
        problems={403: ROLE, 404: NOT_FOUND},
    )
)
def read_logs(job_id: int) -> Response:
    with db.read() as conn:
        return respond(logs_out(attempt_logs.read(conn, g.actor, job_id)))
