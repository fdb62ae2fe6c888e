"""JSON routes of a worker's reports on one job it holds: complete, fail, heartbeat and
release (the batch forms are in ``batches``). Each is the one-item case of the batch code."""

from __future__ import annotations

from flask import Blueprint, Response, g

from app.api.auth import requires
from app.api.openapi import Operation, documented
from app.api.views import JOB, WORK_PROBLEMS, job_response, parse_body
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.batch_requests import ReleaseBody
from app.queue.contract.job_requests import CompleteBody, FailBody, HeartbeatBody
from app.queue.rules.policy import Action
from app.queue.usecases import reports
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce

bp = Blueprint("reports", __name__)


@bp.post("/jobs/<id:job_id>/complete")
@requires(Action.WORK)
@documented(
    Operation(
        summary="Complete a running job (its worker, admins)",
        body=CompleteBody,
        body_required=True,
        responses={200: JOB},
        problems=WORK_PROBLEMS,
    )
)
def complete(job_id: int) -> Response:
    completion = parse_body(CompleteBody, optional=True)
    with db.transaction() as conn:
        done = reports.complete(
            conn,
            g.actor,
            job_id,
            now=utcnow(),
            result=completion.result,
            attempt=completion.attempt,
            settings=queue_settings(),
        )
        announce(done.effects)
    return job_response(done.value)


@bp.post("/jobs/<id:job_id>/fail")
@requires(Action.WORK)
@documented(
    Operation(
        summary="Fail a running job: retried or failed for good (its worker, admins)",
        body=FailBody,
        responses={200: JOB},
        problems=WORK_PROBLEMS,
    )
)
def fail(job_id: int) -> Response:
    failure = parse_body(FailBody)
    with db.transaction() as conn:
        done = reports.fail(
            conn,
            g.actor,
            job_id,
            now=utcnow(),
            settings=queue_settings(),
            error=failure.error,
            attempt=failure.attempt,
            retry_in=failure.retry_in,
            retryable=failure.retryable,
        )
        announce(done.effects)
    return job_response(done.value)


@bp.post("/jobs/<id:job_id>/heartbeat")
@requires(Action.WORK)
@documented(
    Operation(
        summary="Report progress and extend the lease (its worker, admins)",
        body=HeartbeatBody,
        body_required=True,
        responses={200: JOB},
        problems=WORK_PROBLEMS,
    )
)
def heartbeat(job_id: int) -> Response:
    beat = parse_body(HeartbeatBody, optional=True)
    with db.transaction() as conn:
        done = reports.heartbeat(
            conn,
            g.actor,
            job_id,
            now=utcnow(),
            settings=queue_settings(),
            progress=beat.progress,
            message=beat.message,
            attempt=beat.attempt,
        )
        announce(done.effects)
    return job_response(done.value)


@bp.post("/jobs/<id:job_id>/release")
@requires(Action.WORK)
@documented(
    Operation(
        summary="Hand a claimed job back unstarted: pending at once, no retry spent (its worker)",
        body=ReleaseBody,
        responses={200: JOB},
        problems=WORK_PROBLEMS,
    )
)
def release(job_id: int) -> Response:
    handed_back = parse_body(ReleaseBody)
    with db.transaction() as conn:
        done = reports.release(conn, g.actor, job_id, now=utcnow(), attempt=handed_back.attempt)
        announce(done.effects)
    return job_response(done.value)
