"""JSON routes of the schedules (admins only), nested in the API blueprint: bearer tokens,
problem+json errors and strict bodies come from there."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, g, request, url_for

from app.api import body
from app.api.auth import origin, requires
from app.api.openapi import Operation, ResponseDoc, documented
from app.api.respond import respond
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.control_responses import ScheduleList, ScheduleOut
from app.queue.contract.job_requests import NoBody
from app.queue.contract.job_responses import JobOut
from app.queue.contract.response_builders import job_out, schedule_out, schedules_out
from app.queue.contract.schedules import (
    ScheduleCreate,
    ScheduleUpdate,
    parse,
)
from app.queue.rules.policy import Action
from app.queue.usecases import schedules
from app.queue.vocabulary.errors import InvalidInput
from app.queue.vocabulary.schedules import Schedule
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce

bp = Blueprint("schedules", __name__)


SCHEDULE = ResponseDoc("The schedule", ScheduleOut)
ADMINS = {403: "Only admins manage schedules"}
UNKNOWN = {**ADMINS, 404: "No such schedule"}
NAME_TAKEN = {409: "Another schedule has this name"}
_LOCATION = {"Location": {"required": True, "schema": {"type": "string"}}}


def _body(*, optional: bool = False) -> dict[str, Any]:
    return body.json_object(
        request, max_depth=current_app.config["MAX_JSON_DEPTH"], optional=optional
    )


def _schedule(schedule: Schedule, status: int = 200) -> Response:
    return respond(schedule_out(schedule, utcnow()), status)


@bp.get("/schedules")
@requires(Action.MANAGE_SCHEDULES)
@documented(
    Operation(
        summary="Every schedule, by name (admins)",
        responses={200: ResponseDoc("The schedules", ScheduleList)},
        problems=ADMINS,
    )
)
def list_schedules() -> Response:
    with db.read() as conn:
        found = schedules.list_schedules(conn, g.actor)
    return respond(schedules_out(found, utcnow()))


@bp.post("/schedules")
@requires(Action.MANAGE_SCHEDULES)
@documented(
    Operation(
        summary="Create a schedule (admins)",
        description="A five-field cron expression read in `timezone`; each fire time "
        "enqueues one job of `type` with `payload`, however many servers tick.",
        body=ScheduleCreate,
        responses={201: ResponseDoc("Created", ScheduleOut, _LOCATION)},
        problems={**ADMINS, **NAME_TAKEN},
    )
)
def create() -> Response:
    request_ = parse(ScheduleCreate, _body(), queue_settings())
    with db.transaction() as conn:
        schedule = schedules.create(conn, g.actor, request_, now=utcnow(), origin=origin())
    response = _schedule(schedule, 201)
    response.headers["Location"] = url_for(".get", schedule_id=schedule.id)
    return response


@bp.get("/schedules/<id:schedule_id>")
@requires(Action.MANAGE_SCHEDULES)
@documented(Operation(summary="One schedule (admins)", responses={200: SCHEDULE}, problems=UNKNOWN))
def get(schedule_id: int) -> Response:
    with db.read() as conn:
        schedule = schedules.get(conn, g.actor, schedule_id)
    return _schedule(schedule)


@bp.patch("/schedules/<id:schedule_id>")
@requires(Action.MANAGE_SCHEDULES)
@documented(
    Operation(
        summary="Change a schedule's given fields (admins)",
        description="A new cron expression or time zone, or enabling, starts again from the "
        "next fire time; fields left out keep their value (null is not a value).",
        body=ScheduleUpdate,
        responses={200: SCHEDULE},
        problems={**UNKNOWN, **NAME_TAKEN},
    )
)
def update(schedule_id: int) -> Response:
    request_ = parse(ScheduleUpdate, _body(), queue_settings())
    with db.transaction() as conn:
        schedule = schedules.update(
            conn, g.actor, schedule_id, request_, now=utcnow(), origin=origin()
        )
    return _schedule(schedule)


@bp.delete("/schedules/<id:schedule_id>")
@requires(Action.MANAGE_SCHEDULES)
@documented(
    Operation(
        summary="Delete a schedule; the jobs it enqueued stay (admins)",
        responses={204: ResponseDoc("Deleted")},
        problems=UNKNOWN,
    )
)
def delete(schedule_id: int) -> Response:
    with db.transaction() as conn:
        schedules.delete(conn, g.actor, schedule_id, now=utcnow(), origin=origin())
    return Response(status=204)


@bp.post("/schedules/<id:schedule_id>/run")
@requires(Action.MANAGE_SCHEDULES)
@documented(
    Operation(
        summary="Enqueue one job of the schedule now; its fire times stay (admins)",
        body=NoBody,
        body_required=False,
        responses={201: ResponseDoc("The job", JobOut, _LOCATION)},
        problems={**UNKNOWN, 409: "The schedule's job type is no longer allowed"},
    )
)
def run(schedule_id: int) -> Response:
    if data := _body(optional=True):
        raise InvalidInput({name: "unknown field" for name in data})
    with db.transaction() as conn:
        enqueued = schedules.run_now(
            conn, g.actor, schedule_id, now=utcnow(), settings=queue_settings(), origin=origin()
        )
        announce(enqueued.effects)
    job = enqueued.value
    response = respond(job_out(job), 201)
    response.headers["Location"] = url_for("api.jobs.get_job", job_id=job.id)
    return response
