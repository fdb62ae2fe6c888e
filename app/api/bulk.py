"""``POST /jobs/bulk``: preview or apply a governed bulk cancel, retry or delete (admins)."""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.auth import current_actor, origin, requires
from app.api.openapi import Operation, ResponseDoc, documented
from app.api.respond import respond
from app.api.views import ROLE, parse_body
from app.infra.problems import problem
from app.queue.contract.bulk import BulkBody, BulkResponse, StaleCountProblem
from app.queue.contract.response_builders import bulk_applied_out, bulk_preview_out
from app.queue.rules.policy import Action
from app.queue.usecases import bulk_runs
from app.queue.usecases.bulk import StaleCount

bp = Blueprint("bulk", __name__)


@bp.errorhandler(StaleCount)
def stale_count(exc: StaleCount) -> Response:
    """409 with the count the selection holds now, so the caller can look again."""
    return problem(exc.status, exc.detail, title=exc.title, extra={"count": exc.count})


@bp.post("/jobs/bulk")
@requires(Action.BULK_JOBS)
@documented(
    Operation(
        summary="Preview or apply a bulk cancel, retry or delete (admins)",
        description="Selects the jobs matching `filter` that `action` applies to (cancel: "
        "pending and running; retry: failed and cancelled; delete: completed, failed and "
        'cancelled). Without `expect_count`: `{"count", "sample"}` and nothing changes. '
        'With `expect_count` equal to the count: the operation, `{"operation", "affected"}`; '
        "a job that changed in between is skipped. More than BULK_MAX_JOBS jobs is 422. "
        "Applies run one at a time: one that waited for another counts what that one left.",
        body=BulkBody,
        responses={200: ResponseDoc("The preview, or the applied operation", BulkResponse)},
        problems={
            403: ROLE,
            409: ResponseDoc(
                "The selection no longer holds `expect_count` jobs (or another bulk "
                "operation was still being applied after a wait)",
                StaleCountProblem,
            ),
        },
    )
)
def bulk_jobs() -> Response:
    body = parse_body(BulkBody)
    selection = body.to_selection()
    actor = current_actor()
    if body.expect_count is None:
        found = bulk_runs.preview(actor, selection)
        return respond(bulk_preview_out(found))
    done = bulk_runs.apply(
        actor, selection, reason=body.reason, expect_count=body.expect_count, origin=origin()
    )
    return respond(bulk_applied_out(done.operation, done.affected))
