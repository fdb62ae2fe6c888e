"""Operations routes for tokens: Prometheus metrics (admins, monitors) and the audit log."""

from __future__ import annotations

from flask import Blueprint, Response, g, jsonify, request

from app import access, db
from app.audit import query
from app.monitoring import rollup
from app.monitoring.exposition import JobFigures, exposition
from app.queue import count_store
from app.queue.policy import Action
from app.queue_settings import queue_settings
from app.timeutil import utcnow

bp = Blueprint("ops", __name__)
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"
requires = access.guard(lambda: g.actor)  # the API blueprint's token check sets g.actor


@bp.get("/metrics")
@requires(Action.READ_METRICS)
def metrics() -> Response:
    """Job figures as the database has them now (the same from every server), HTTP figures
    of this server's processes."""
    now = utcnow()
    job_types = queue_settings().job_types
    with db.transaction() as conn:  # short: folds only the events since the last scrape
        rollup.roll_up(conn)
    with db.read() as conn:
        figures = JobFigures(
            now=now,
            job_types=job_types,
            counts=count_store.counts_by_status_type(conn),
            oldest_due=rollup.oldest_due(conn, job_types, now),
            totals=rollup.totals(conn),
        )
    return Response(exposition(figures), mimetype=None, content_type=EXPOSITION_TYPE)


@bp.get("/audit")
@requires(Action.READ_AUDIT)
def audit() -> Response:
    """The audit log, newest first, with a cursor to the next page (admins)."""
    filters = query.parse_filters(request.args)
    with db.read() as conn:
        page = query.audit_page(conn, filters)
    return jsonify(
        {"events": [event.as_json() for event in page.events], "next_cursor": page.next_cursor}
    )
