"""Admin pages for operators: the workers overview, the audit log and retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Blueprint, current_app, render_template, request, url_for
from werkzeug.datastructures import MultiDict

from app.audit import queries as audit_queries
from app.audit.actions import AuditAction
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.monitoring.workers import workers as worker_rows
from app.queue.rules import retention
from app.queue.rules.policy import Action
from app.queue.vocabulary.errors import InvalidInput
from app.queue.vocabulary.timeutil import human_duration, utcnow
from app.web.guard import require_login, requires

bp = Blueprint("ops", __name__, url_prefix="/ui")
bp.before_request(require_login)
AUDIT_PAGE_SIZE = 50


@bp.get("/workers")
@requires(Action.VIEW_WORKERS)
def workers() -> str:
    now = utcnow()
    with db.read() as conn:
        rows = worker_rows(conn, now=now)
    return render_template("ops/workers.html", workers=rows, now=now)


@bp.get("/admin/audit")
@requires(Action.READ_AUDIT)
def audit() -> tuple[str, int]:
    args = MultiDict([(k, v) for k, v in request.args.items() if v != ""])
    errors: dict[str, str] = {}
    page = None
    try:
        filters = audit_queries.parse_filters(args, default_limit=AUDIT_PAGE_SIZE)
    except InvalidInput as exc:
        errors = exc.errors
    else:
        with db.read() as conn:
            page = audit_queries.audit_page(conn, filters)
    base: dict[str, Any] = {k: v for k, v in args.items() if k != "cursor"}
    older = (
        url_for(".audit", **base, cursor=page.next_cursor) if page and page.next_cursor else None
    )
    return render_template(
        "ops/audit.html",
        events=page.events if page else [],
        errors=errors,
        args=args,
        actions=list(AuditAction),
        older_url=older,
        first_url=url_for(".audit", **base) if "cursor" in args else None,
        day_example=audit_queries.DAY_EXAMPLE,
    ), 422 if errors else 200


def _kept(seconds: int | None) -> str:
    """A retention for people: "forever", "14 days", or a shorter duration."""
    if seconds is None:
        return "forever"
    days, rest = divmod(seconds, retention.DAY)
    if days and not rest:
        return f"{days} day{'s' if days > 1 else ''}"
    return human_duration(timedelta(seconds=seconds))


@bp.get("/retention")
@requires(Action.VIEW_RETENTION)
def retention_page() -> str:
    """How long finished jobs and audit rows are kept, and what the last prune removed."""
    rules = queue_settings().retention
    kept = [(f"{status.capitalize()} jobs", _kept(s)) for status, s in rules.jobs.items()]
    with db.read() as conn:
        last = retention.last_prune(conn)
    return render_template(
        "ops/retention.html",
        kept=[*kept, ("Audit rows", _kept(rules.audit))],
        last=last,
        tick_seconds=int(current_app.config["RETENTION_TICK_SECONDS"]),
        batch=queue_settings().prune_batch,
    )
