"""JSON route of groups of jobs: a group's counts and callbacks, for its owner and
admins; nested in the API blueprint, which checks the bearer token."""

from __future__ import annotations

from flask import Blueprint, Response, g

from app import db
from app.api.auth import requires
from app.api.openapi import Operation, Reply, documented
from app.api.replies import reply
from app.queue.contract.answers import group_out
from app.queue.contract.responses import GroupOut
from app.queue.domain import workflow
from app.queue.domain.policy import Action

bp = Blueprint("groups", __name__)


@bp.get("/groups/<id:group_id>")
@requires(Action.VIEW_GROUPS)
@documented(
    Operation(
        summary="A group of jobs: members per status, whether all finished, its callbacks",
        description="Its owner and admins; anyone else is answered 404, as for a missing group.",
        replies={200: Reply("The group", GroupOut)},
        problems={404: "No such group, or the caller may not see it"},
    )
)
def get_group(group_id: int) -> Response:
    with db.read() as conn:
        found = workflow.get_group(conn, g.actor, group_id)
    return reply(group_out(found))
