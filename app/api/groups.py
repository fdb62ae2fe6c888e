"""JSON route of groups of jobs: a group's counts and callbacks, for its owner and
admins; nested in the API blueprint, which checks the bearer token."""

from __future__ import annotations

from flask import Blueprint, Response, g

from app.api.auth import requires
from app.api.openapi import Operation, ResponseDoc, documented
from app.api.respond import respond
from app.infra import db
from app.queue.contract.job_responses import GroupOut
from app.queue.contract.response_builders import group_out
from app.queue.rules import workflows
from app.queue.rules.policy import Action

bp = Blueprint("groups", __name__)


@bp.get("/groups/<id:group_id>")
@requires(Action.VIEW_GROUPS)
@documented(
    Operation(
        summary="A group of jobs: members per status, whether all finished, its callbacks",
        description="Its owner and admins; anyone else is answered 404, as for a missing group.",
        responses={200: ResponseDoc("The group", GroupOut)},
        problems={404: "No such group, or the caller may not see it"},
    )
)
def get_group(group_id: int) -> Response:
    with db.read() as conn:
        found = workflows.get_group(conn, g.actor, group_id)
    return respond(group_out(found))
