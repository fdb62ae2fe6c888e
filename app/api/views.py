"""JSON routes of one job (enqueue, list, read, explain, claim, cancel, retry, run now): parse the
request, call the use cases in a transaction, shape the answer; and the helpers the other
route modules share to do the same."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from flask import Blueprint, Response, current_app, g, request, url_for

from app.api import admission, auth, body, claims, longpoll
from app.api.auth import requires
from app.api.openapi import Operation, ResponseDoc, documented
from app.api.respond import respond
from app.api.tracing import TRACE_HEADERS, request_trace
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.infra.secretbox import current_box
from app.queue.contract import response_builders
from app.queue.contract.control_responses import ExplanationOut
from app.queue.contract.job_requests import (
    ClaimBody,
    EnqueueBody,
    JobQuery,
    ListQuery,
    NoBody,
    RetryBody,
)
from app.queue.contract.job_responses import (
    Claimed,
    EventList,
    JobList,
    JobOut,
)
from app.queue.contract.request_model import RequestModel
from app.queue.rules import uniqueness
from app.queue.rules.policy import Action
from app.queue.usecases import enqueueing, explain, job_actions, listing, reading
from app.queue.vocabulary.job_fields import IDEMPOTENCY_KEY
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce

bp = Blueprint("jobs", __name__)
Model = TypeVar("Model", bound=RequestModel)


def parse_body(
    model: type[Model], *, optional: bool = False, items_below: int = 0, **context: Any
) -> Model:
    """The request body as ``model`` (``optional``, ``items_below``: as for ``json_body``)."""
    body_json = json_body(optional=optional, items_below=items_below)
    return model.parse(body_json, queue_settings(), **context)


# How far down a body of many jobs (``{"jobs": [...]}``) each job sits.
ITEMS_BELOW = 2


def json_body(*, optional: bool = False, items_below: int = 0) -> dict[str, Any]:
    """The request's JSON object body (``optional``: an empty body stands for ``{}``). A body
    whose items are ``items_below`` levels down may nest that much deeper than
    MAX_JSON_DEPTH, so each item may nest as deep as a body of its own."""
    max_depth = current_app.config["MAX_JSON_DEPTH"] + items_below
    return body.json_object(request, max_depth=max_depth, optional=optional)


_LOCATION = {
    "Location": {"required": True, "schema": {"type": "string", "pattern": "/jobs/[0-9]+$"}}
}
JOB = ResponseDoc("The job", JobOut)
ROLE = "The caller's role may not do this"
CAP = "The caller's role may not enqueue, or the priority is above its cap"
NOT_FOUND = "No such job, or the caller may not see it"
WORK_PROBLEMS = {403: ROLE, 404: NOT_FOUND, 409: "The job's state does not allow this"}


def job_response(job: Job, status: int = 200, *, duplicate: bool = False) -> Response:
    """A job as the caller may see it; ``duplicate``: the active job of an enqueue's
    unique_key, answered instead of a new one."""
    return respond(
        response_builders.job_out(job, duplicate=duplicate),
        status,
    )


@bp.post("/jobs")
@requires(Action.ENQUEUE)
@documented(
    Operation(
        summary="Enqueue a job (producers, admins)",
        description="Repeating an idempotency key with the same request (same fields after "
        "defaults) answers 200 with the existing job; the same key with a different request "
        "is 422. Then, with `unique_key`, the caller's active job of the same type and key "
        'answers 200 with `"duplicate": true` and nothing is added.',
        body=EnqueueBody,
        headers={
            "Idempotency-Key": {"type": "string", "pattern": IDEMPOTENCY_KEY.pattern},
            **TRACE_HEADERS,
        },
        responses={
            201: ResponseDoc("Created", JobOut, _LOCATION),
            200: ResponseDoc(
                "The existing job of a repeated idempotency key, or the active job of the "
                'unique key (with "duplicate": true)',
                JobOut,
                _LOCATION,
            ),
        },
        problems={403: CAP, 409: "The idempotency key is being used by a request in flight"},
    )
)
def enqueue() -> Response:
    box = current_box()
    enqueue_body = parse_body(
        EnqueueBody, header_key=request.headers.get("Idempotency-Key"), secrets_box=box
    )
    wanted = enqueue_body.to_request(box, trace=request_trace())
    with db.transaction() as conn:
        enqueued = enqueueing.enqueue(conn, g.actor, wanted, now=utcnow())
        announce(enqueued.effects)
    job, created = enqueued.value
    duplicate = uniqueness.is_duplicate(wanted, job, created)
    response = job_response(job, 201 if created else 200, duplicate=duplicate)
    response.headers["Location"] = url_for("api.jobs.get_job", job_id=job.id)
    return response


@bp.get("/jobs")
@requires(Action.VIEW_JOBS)
@documented(
    Operation(
        summary="List the caller's jobs (admins: all), newest first",
        query=ListQuery,
        responses={200: ResponseDoc("A page of jobs", JobList)},
    )
)
def list_jobs() -> Response:
    filters = ListQuery.from_args(request.args, queue_settings()).to_filters()
    with db.read() as conn:
        page = listing.page(conn, g.actor, filters)
    return respond(response_builders.job_page_out(page))


@bp.get("/jobs/<id:job_id>")
@requires(Action.VIEW_JOBS)
@documented(
    Operation(
        summary="One job; with wait_seconds, as soon as it is finished",
        description="`wait_seconds` (0..30) answers as soon as the job is completed, failed or "
        "cancelled, or after that many seconds with the job as it is then (200 either way). "
        "When the token (LONG_POLL_PER_TOKEN) or the process (half its handlers) already has "
        "as many waiting as allowed, it answers at once with the job and Retry-After.",
        query=JobQuery,
        responses={200: JOB},
        problems={404: NOT_FOUND},
    )
)
def get_job(job_id: int) -> Response:
    wait_seconds = JobQuery.from_args(request.args, queue_settings()).wait_seconds
    if not wait_seconds:
        with db.read() as conn:
            return job_response(reading.get_job(conn, g.actor, job_id))
    job, refused_wait = longpoll.outcome(job_id, wait_seconds)
    response = job_response(job)
    if refused_wait:
        response.headers["Retry-After"] = admission.RETRY_AFTER
    return response


@bp.get("/jobs/<id:job_id>/events")
@requires(Action.VIEW_JOBS)
@documented(
    Operation(
        summary="A job's events, oldest first",
        responses={200: ResponseDoc("The events", EventList)},
        problems={404: NOT_FOUND},
    )
)
def job_events(job_id: int) -> Response:
    with db.read() as conn:
        events = reading.list_events(conn, g.actor, job_id)
    return respond(response_builders.events_out(events))


@bp.get("/jobs/<id:job_id>/explain")
@requires(Action.VIEW_JOBS)
@documented(
    Operation(
        summary="Why a job is not running, or what it is doing",
        description="Each reason has a code, a sentence for people and its figures (the "
        "README lists the codes).",
        responses={200: ResponseDoc("The job's status and the reasons", ExplanationOut)},
        problems={404: NOT_FOUND},
    )
)
def explain_job(job_id: int) -> Response:
    idle = timedelta(seconds=current_app.config["EXPLAIN_IDLE_WORKER_SECONDS"])
    with db.read() as conn:
        found = explain.explain(
            conn, g.actor, job_id, now=utcnow(), idle_after=idle, settings=queue_settings()
        )
    return respond(response_builders.explanation_out(found))


@bp.post("/jobs/claim")
@requires(Action.WORK)
@documented(
    Operation(
        summary="Claim the next due job, or up to max_jobs of them (workers, admins)",
        description='Without `max_jobs` the answer is the job; with it, `{"jobs": [...]}` '
        "holding 1..max_jobs jobs in claim order. `types` hands out only those job types. "
        "`wait_seconds` waits for a job to become due (204 when none did); when the token "
        "(LONG_POLL_PER_TOKEN) or the process (half its handlers) already has as many "
        "waiting as allowed, it answers 204 at once with Retry-After.",
        body=ClaimBody,
        body_required=False,
        responses={
            200: ResponseDoc(
                "The claimed job(s), now running, each with its attempt and lease", Claimed
            ),
            204: ResponseDoc("Nothing is claimable"),
        },
        problems={403: ROLE},
    )
)
def claim() -> Response:
    claim_body = parse_body(ClaimBody, optional=True)
    found = claims.claim(claim_body.to_wanted())
    if not found.jobs:
        # Refused a wait (too many waiting): say when to ask again rather than queue.
        headers = {"Retry-After": admission.RETRY_AFTER} if found.refused_wait else None
        return Response(status=204, headers=headers)
    many = claim_body.max_jobs is not None
    return respond(
        response_builders.claimed_out(found.jobs, found.secrets, found.parents, many=many)
    )


@bp.post("/jobs/<id:job_id>/cancel")
@requires(Action.CANCEL)
@documented(
    Operation(
        summary="Cancel a pending or running job (its producer, admins)",
        body=NoBody,
        body_required=False,
        responses={200: JOB},
        problems=WORK_PROBLEMS,
    )
)
def cancel(job_id: int) -> Response:
    parse_body(NoBody, optional=True)
    with db.transaction() as conn:
        cancelled = job_actions.cancel(conn, g.actor, job_id, now=utcnow(), origin=auth.origin())
        announce(cancelled.effects)
    return job_response(cancelled.value)


@bp.post("/jobs/<id:job_id>/retry")
@requires(Action.RETRY)
@documented(
    Operation(
        summary="Queue a failed or cancelled job again, its fields edited or not (admins)",
        description="Without a body the job is retried as it was. The fields given replace "
        "the job's (each validated as at enqueue; a field left out is kept, `null` is 422); "
        "the job's events get `edited` and the audit row `changed`, naming the fields whose "
        "value changed, never the values. A finished job's secret values were erased: the "
        "retried job runs without them, edited or not.",
        body=RetryBody,
        body_required=False,
        responses={200: JOB},
        problems=WORK_PROBLEMS,
    )
)
def retry(job_id: int) -> Response:
    edit = parse_body(RetryBody, optional=True).to_edit()
    with db.transaction() as conn:
        retried = job_actions.retry(
            conn, g.actor, job_id, now=utcnow(), origin=auth.origin(), edit=edit
        )
        announce(retried.effects)
    return job_response(retried.value)


@bp.post("/jobs/<id:job_id>/run-now")
@requires(Action.RUN_NOW)
@documented(
    Operation(
        summary="Make a pending job waiting for its run_at or a backoff due now (its "
        "producer, admins)",
        description="The job's `run_at` becomes now and its events get `run_now`. 409 when "
        "the job is not pending, is due already, or something other than time holds it (its "
        "dependencies, its type paused, a flow limit; the problem says which, as the explainer "
        "does).",
        body=NoBody,
        body_required=False,
        responses={200: JOB},
        problems=WORK_PROBLEMS,
    )
)
def run_now(job_id: int) -> Response:
    parse_body(NoBody, optional=True)
    with db.transaction() as conn:
        ran = job_actions.run_now(
            conn, g.actor, job_id, now=utcnow(), origin=auth.origin(), settings=queue_settings()
        )
        announce(ran.effects)
    return job_response(ran.value)
