"""JSON routes that take many items at once: batch enqueue, finish and heartbeat."""

from __future__ import annotations

from collections.abc import Sequence

from flask import Blueprint, Response, g

from app.api import admission, claims
from app.api.auth import requires
from app.api.openapi import Operation, ResponseDoc, documented
from app.api.respond import respond
from app.api.tracing import TRACE_HEADERS, request_trace
from app.api.views import CAP, ITEMS_BELOW, ROLE, WORK_PROBLEMS, json_body, parse_body
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.infra.secretbox import current_box
from app.queue.contract import response_builders
from app.queue.contract.batch_requests import (
    BatchRequest,
    ChildrenBody,
    FinishBody,
    HeartbeatsBody,
    PerItemBatchBody,
)
from app.queue.contract.job_responses import BatchAnswer, BeatResults, CreatedJobs, FinishResults
from app.queue.rules.policy import Action
from app.queue.rules.secret_fields import Sealer
from app.queue.usecases import children, enqueueing, reports
from app.queue.vocabulary.errors import QueueError
from app.queue.vocabulary.jobs import Job, Outcome
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce

bp = Blueprint("batches", __name__)
_PER_ITEM = "Each item is answered with the status its single-job route would give."


@bp.post("/jobs/batch")
@requires(Action.ENQUEUE)
@documented(
    Operation(
        summary="Enqueue many jobs: all or nothing, or each on its own (producers, admins)",
        description="Each item is a `POST /jobs` body, with the same idempotency rules. 201 "
        "with the jobs in request order (200 when every item was an idempotent replay). A "
        "refused item refuses the batch: 422 with `errors` keyed like `jobs[3].type`, or 403 "
        "naming the item above the caller's priority cap; nothing is stored. Items may wait "
        "for jobs (`depends_on`) and for earlier items (`after_items`, their indexes); with "
        "`group`, the new jobs form a group (`group_id`) whose callbacks are enqueued once "
        'every member has finished. With `"atomic": false` (no `group` then), each item is '
        "admitted on its own, as `POST /jobs` would admit it after the items before it: 200 "
        "with `results`, each item's status (201, 200, 403, 409, 422) and its job or its "
        "`detail` and `errors` (keyed as `POST /jobs` keys them); a refused item, malformed "
        "or not, undoes nothing, and an item whose `after_items` names a refused item is "
        "refused too (422). An item may nest as deep as a `POST /jobs` body (MAX_JSON_DEPTH "
        "counts from the item).",
        body=BatchRequest,
        headers=TRACE_HEADERS,
        responses={
            201: ResponseDoc("The jobs, in request order", CreatedJobs),
            200: ResponseDoc(
                "Every item was an idempotent replay: the existing jobs; or, with "
                '`"atomic": false`, each item\'s answer',
                BatchAnswer,
            ),
        },
        problems={403: CAP, 409: "An idempotency key is being used by a request in flight"},
    )
)
def enqueue_batch() -> Response:
    box = current_box()
    batch = BatchRequest.parse(
        json_body(items_below=ITEMS_BELOW), queue_settings(), secrets_box=box
    )
    if isinstance(batch, PerItemBatchBody):
        return _enqueue_each(batch, box)
    trace = request_trace()
    requests = [item.to_request(box, trace=trace) for item in batch.jobs]
    group = None if batch.group is None else batch.group.to_request()
    with db.transaction() as conn:
        enqueued = enqueueing.enqueue_many(conn, g.actor, requests, now=utcnow(), group=group)
        announce(enqueued.effects)
    added = enqueued.value
    answer = response_builders.created_out(requests, added, grouped=group is not None)
    return _created(answer, added)


def _enqueue_each(batch: PerItemBatchBody, box: Sealer | None) -> Response:
    """``"atomic": false``: each item admitted on its own, answered 200 item by item."""
    items = batch.to_requests(queue_settings(), box, request_trace())
    with db.transaction() as conn:
        enqueued = enqueueing.enqueue_each(conn, g.actor, items, now=utcnow())
        announce(enqueued.effects)
    answer = response_builders.each_out(items, enqueued.value)
    return respond(answer)


def _created(answer: CreatedJobs, added: list[tuple[Job, bool]]) -> Response:
    """201 unless every item was an idempotent replay."""
    return respond(answer, 201 if any(created for _, created in added) else 200)


@bp.post("/jobs/<id:job_id>/children")
@requires(Action.SPAWN)
@documented(
    Operation(
        summary="Enqueue children of a running job, as its producer's jobs (its worker)",
        description="Only the worker holding `attempt` of the job may: anyone else gets the "
        "404 or 409 a finish of the job would get. The children carry `parent_id`, belong to "
        "the job's producer (its priority cap: 403 naming an item above it) and are answered "
        "as a batch enqueue is (all or nothing). Their idempotency and unique keys live in the "
        "job's namespace (its children's, across attempts), their `depends_on` may name the "
        "job and its other children only (else 422 as for a job that does not exist), and a "
        "child that already existed is shown as its enqueue made it, never as it ran since. "
        "A job has at most MAX_CHILDREN_PER_JOB children in all: beyond, 422.",
        body=ChildrenBody,
        headers=TRACE_HEADERS,
        responses={
            201: ResponseDoc("The children, in request order", CreatedJobs),
            200: ResponseDoc("Every item was an idempotent replay: the existing jobs", CreatedJobs),
        },
        problems={
            **WORK_PROBLEMS,
            403: "The caller's role may not, or an item's priority is above the producer's cap",
        },
    )
)
def spawn_children(job_id: int) -> Response:
    box = current_box()
    body = parse_body(ChildrenBody, items_below=ITEMS_BELOW, secrets_box=box)
    trace = request_trace()
    requests = [item.to_request(box, trace=trace) for item in body.jobs]
    with db.transaction() as conn:
        spawned = children.spawn(
            conn,
            g.actor,
            job_id,
            body.attempt,
            requests,
            now=utcnow(),
            max_children=queue_settings().max_children,
        )
        announce(spawned.effects)
    added = spawned.value
    answer = response_builders.created_out(requests, added)
    return _created(answer, added)


@bp.post("/jobs/finish")
@requires(Action.WORK)
@documented(
    Operation(
        summary="Report many outcomes (completed or failed), then claim the next jobs (workers)",
        description=f"{_PER_ITEM} 200 with the job, 404, 409 or 422 (e.g. a failed outcome "
        "without `error`) with a `detail`. The request is 422 only when its shape is wrong. "
        "With `claim` (then `results` may be empty), once the outcomes are applied jobs are "
        "claimed as `POST /jobs/claim` with `max_jobs` would, and the answer's `jobs` holds "
        "them: empty when none was due by the end of the wait, or at once (with Retry-After) "
        "when the token or the process already has as many waiting as allowed.",
        body=FinishBody,
        responses={200: ResponseDoc("Each outcome's answer, in request order", FinishResults)},
        problems={403: ROLE},
    )
)
def finish() -> Response:
    body = parse_body(FinishBody)
    outcomes = [item.to_outcome() for item in body.results]
    wanted = None if body.claim is None else body.claim.to_wanted()
    if wanted is not None and not outcomes:
        # Nothing to report: a plain claim, without a transaction when nothing is due.
        return _finish_answer([], [], claims.claim(wanted))
    seen = claims.knowledge() if wanted is not None and wanted.wait_seconds else None
    found = None
    with db.transaction() as conn:
        done = reports.finish(conn, g.actor, outcomes, now=utcnow(), settings=queue_settings())
        effects = done.effects
        if wanted is not None and claims.worth_a_look(wanted, effects):
            found = claims.look(conn, g.actor, wanted)
            effects = effects.taken(found.jobs)  # claimed here: nobody else need look
        elif wanted is not None:
            claims.note_poll(conn, wanted)
        announce(effects)
    if wanted is not None and found is not None:
        claims.report_taken(wanted, found, seen)
    if wanted is not None and not (found and found.jobs) and seen is not None:
        found = claims.wait(wanted)
    return _finish_answer(outcomes, done.value, found)


def _finish_answer(
    outcomes: Sequence[Outcome], done: Sequence[Job | QueueError], found: claims.Claim | None
) -> Response:
    """The finish's answer: each outcome's result, and the claimed jobs when it claimed."""
    claimed = None if found is None else (found.jobs, found.secrets, found.parents)
    response = respond(response_builders.finish_out(outcomes, done, claimed=claimed))
    if found is not None and found.refused_wait:
        response.headers["Retry-After"] = admission.RETRY_AFTER
    return response


@bp.post("/jobs/heartbeat")
@requires(Action.WORK)
@documented(
    Operation(
        summary="Extend many leases and report progress in one transaction (workers)",
        description=f"{_PER_ITEM} 200 with the new `lease_expires_at`, or 404 or 409 with a "
        "`detail` (which says so when the job was cancelled).",
        body=HeartbeatsBody,
        responses={200: ResponseDoc("Each heartbeat's answer, in request order", BeatResults)},
        problems={403: ROLE},
    )
)
def heartbeat_batch() -> Response:
    beats = [item.to_beat() for item in parse_body(HeartbeatsBody).jobs]
    with db.transaction() as conn:
        beaten = reports.heartbeat_many(
            conn, g.actor, beats, now=utcnow(), settings=queue_settings()
        )
        announce(beaten.effects)
    return respond(response_builders.beats_out(beats, beaten.value))
