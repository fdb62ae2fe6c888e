"""JSON routes of the job types (admins only): counts, effective limits, and the overrides
that pause a type or limit it; nested in the API blueprint, which checks the bearer token."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, g, request

from app.api import body
from app.api.auth import origin, requires
from app.api.openapi import Operation, ResponseDoc, documented
from app.api.respond import respond
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.control_responses import TypeList, TypeOut
from app.queue.contract.response_builders import type_out, types_out
from app.queue.rules.policy import Action
from app.queue.usecases import job_types
from app.queue.usecases.job_types import TypeChange
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce

bp = Blueprint("types", __name__)
ADMINS = {403: "Only admins manage job types"}


@bp.get("/types")
@requires(Action.MANAGE_TYPES)
@documented(
    Operation(
        summary="Every job type: jobs per status and the limits claims obey (admins)",
        responses={200: ResponseDoc("The configured job types", TypeList)},
        problems=ADMINS,
    )
)
def list_types() -> Response:
    with db.read() as conn:
        found = job_types.list_types(conn, g.actor, queue_settings())
    return respond(types_out(found))


@bp.patch("/types/<job_type>")
@requires(Action.MANAGE_TYPES)
@documented(
    Operation(
        summary="Pause, resume or limit a job type at runtime (admins, audited)",
        description="Each field given overrides the configuration (`JOB_TYPE_SETTINGS`); "
        "`null` clears the override, so the configured value applies again. Claims obey the "
        "change from its commit on (`max_run_seconds`: attempts claimed from then on).",
        body=TypeChange,
        responses={200: ResponseDoc("The job type with its limits now", TypeOut)},
        problems={**ADMINS, 404: "Not a configured job type"},
    )
)
def change_type(job_type: str) -> Response:
    data = body.json_object(request, max_depth=current_app.config["MAX_JSON_DEPTH"])
    change = TypeChange.parse(data, queue_settings())
    with db.transaction() as conn:
        changed = job_types.change(
            conn, g.actor, queue_settings(), job_type, change, now=utcnow(), origin=origin()
        )
        announce(changed.effects)
    return respond(type_out(changed.value))
