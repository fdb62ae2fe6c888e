"""Operations routes for tokens: Prometheus metrics (admins, monitors) and the audit log."""

from __future__ import annotations

from flask import Blueprint, Response, request

from app.api.auth import requires
from app.api.openapi import Operation, ResponseDoc, documented
from app.api.respond import respond
from app.audit import queries as audit_queries
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.monitoring import rollup
from app.monitoring.exposition import JobFigures, exposition
from app.queue.rules.policy import Action
from app.queue.usecases import partition_figures, stats
from app.queue.usecases.job_types import paused as paused_types
from app.queue.vocabulary.timeutil import utcnow

bp = Blueprint("ops", __name__)
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ROLE = "The caller's role may not do this"


@bp.get("/metrics")
@requires(Action.READ_METRICS)
@documented(
    Operation(
        summary="Prometheus metrics (admins, monitors)",
        description="Job figures as the database has them (the same from every server), "
        "HTTP figures of this server's processes.",
        responses={
            200: ResponseDoc("The Prometheus text exposition, version 0.0.4", text="text/plain")
        },
        problems={403: ROLE},
    )
)
def metrics() -> Response:
    """Job figures as the database has them now (the same from every server), HTTP figures
    of this server's processes."""
    now = utcnow()
    job_types = queue_settings().job_types
    with db.transaction() as conn:  # short: folds only the events since the last scrape
        rollup.roll_up(conn)
    with db.read() as conn:
        queue = stats.scrape_figures(conn)
        types = {*job_types, *(job_type for _, job_type, _ in queue.by_status_type)}
        figures = JobFigures(
            now=now,
            job_types=job_types,
            counts=queue.by_status_type,
            oldest_due=rollup.oldest_due(conn, job_types, now),
            totals=rollup.totals(conn),
            paused=paused_types(conn, queue_settings()),
            held_by_dependencies=queue.held_by_dependencies,
            partitions=partition_figures.busiest(conn, sorted(types), now),
        )
    return Response(exposition(figures), mimetype=None, content_type=EXPOSITION_TYPE)


@bp.get("/audit")
@requires(Action.READ_AUDIT)
@documented(
    Operation(
        summary="The audit log, newest first (admins)",
        query=audit_queries.AuditQuery,
        responses={200: ResponseDoc("A page of audit events", audit_queries.AuditEvents)},
        problems={403: ROLE},
    )
)
def audit() -> Response:
    """The audit log, newest first, with a cursor to the next page (admins)."""
    filters = audit_queries.parse_filters(request.args)
    with db.read() as conn:
        page = audit_queries.audit_page(conn, filters)
    return respond(audit_queries.audit_page_out(page))
