"""The HTML blueprint: what every page shares (the policy in templates, error pages, htmx
redirects) and, nested in it, the blueprint of each page module."""

from __future__ import annotations

from flask import Blueprint, redirect, render_template
from flask_login import current_user
from werkzeug.wrappers import Response

from app.accounts.errors import AccountError
from app.infra import access
from app.infra.secretbox import HOW_TO_MAKE_A_KEY, current_box
from app.queue.rules import policy
from app.queue.rules.policy import Action
from app.queue.vocabulary.errors import QueueError
from app.queue.vocabulary.timeutil import human_duration
from app.web.account import bp as account_bp
from app.web.admin import bp as admin_bp
from app.web.auth import bp as auth_bp
from app.web.bulk import bp as bulk_bp
from app.web.guard import current_actor
from app.web.htmx import is_htmx
from app.web.job_fixes import bp as job_fixes_bp
from app.web.operations import bp as operations_bp
from app.web.pages import bp as pages_bp
from app.web.schedules import bp as schedules_bp
from app.web.second_factor import bp as second_factor_bp
from app.web.types import bp as types_bp

bp = Blueprint("web", __name__)
PAGES = (
    auth_bp,
    pages_bp,
    job_fixes_bp,
    admin_bp,
    account_bp,
    second_factor_bp,
    operations_bp,
    schedules_bp,
    bulk_bp,
    types_bp,
)
for pages in PAGES:
    bp.register_blueprint(pages)


@bp.after_request
def redirect_htmx(response: Response) -> Response:
    """htmx follows a 302 inside its XHR and would swap the next page into a fragment; tell it
    to navigate instead (forms posted with hx-confirm end here, e.g. revoking a token)."""
    if is_htmx() and response.status_code in (301, 302, 303) and response.location:
        navigate = Response(status=200)
        navigate.headers["HX-Redirect"] = response.location
        navigate.vary.add("HX-Request")
        return navigate
    return response


@bp.app_context_processor
def permissions() -> dict[str, object]:
    """Templates ask the policy (``can(Action.CANCEL, job)``) and never compare role strings.
    Only an ``Action`` is accepted: a misspelt one is undefined in the template and fails the
    render in the tests that open every page, not a silent False. Whether the viewer may read
    error texts is asked here once for every page: templates show ``job.error`` and
    ``event.error`` only under ``sees_errors``, the one place pages redact them."""

    def can(action: Action, job: object = None) -> bool:
        if not isinstance(action, Action):
            raise TypeError(f"can() takes an Action, not {action!r}")
        return bool(current_user.is_authenticated) and policy.can(current_actor(), action, job)  # type: ignore[arg-type]

    viewer = current_actor() if current_user.is_authenticated else None
    sees_errors = viewer is not None and policy.sees_errors(viewer)
    return {"can": can, "Action": Action, "sees_errors": sees_errors}


@bp.app_context_processor
def server() -> dict[str, object]:
    """What the server can do, so pages offer only that: without SECRETS_KEY no second factor
    can be stored (its page would answer 503), and the admins are told what is missing."""
    return {"secrets_ready": current_box() is not None, "how_to_make_a_key": HOW_TO_MAKE_A_KEY}


@bp.get("/")
@access.mark(access.PUBLIC)
def index() -> Response:
    return redirect("/ui/")


@bp.app_template_filter("ts")
def format_timestamp(value: object) -> str:
    """A timestamp for people: UTC, to the second."""
    return "" if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"


bp.add_app_template_filter(human_duration, "age")  # "3 h 05 min", "42 s"


@bp.errorhandler(AccountError)
@bp.errorhandler(QueueError)
def queue_error(exc: QueueError | AccountError) -> tuple[str, int]:
    """Service refusals (403, 404, 409...) as the error page, the same status as the API."""
    return render_template("error.html", status=exc.status, detail=exc.detail), exc.status
