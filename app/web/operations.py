"""Admin pages for operators: the workers overview and the audit log."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template, request, url_for
from werkzeug.datastructures import MultiDict

from app import db
from app.audit import query
from app.audit.actions import AuditAction
from app.monitoring.workers import workers as worker_rows
from app.queue.domain.errors import InvalidInput
from app.queue.domain.policy import Action
from app.timeutil import utcnow
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
        filters = query.parse_filters(args, default_limit=AUDIT_PAGE_SIZE)
    except InvalidInput as exc:
        errors = exc.errors
    else:
        with db.read() as conn:
            page = query.audit_page(conn, filters)
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
    ), 422 if errors else 200
