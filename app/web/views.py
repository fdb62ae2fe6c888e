"""The HTML blueprint: sign-in, the job pages and the admin pages, and their error pages."""

from __future__ import annotations

from flask import Blueprint, redirect, render_template
from werkzeug.wrappers import Response

from app.queue.errors import QueueError
from app.timeutil import human_duration
from app.web import admin, auth, pages, schedules
from app.web.htmx import is_htmx

bp = Blueprint("web", __name__)
bp.register_blueprint(auth.bp)
bp.register_blueprint(pages.bp)
bp.register_blueprint(admin.bp)
bp.register_blueprint(schedules.bp)


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


@bp.get("/")
def index() -> Response:
    return redirect("/ui/")


@bp.app_template_filter("ts")
def format_timestamp(value: object) -> str:
    """A timestamp for people: UTC, to the second."""
    return "" if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"


bp.add_app_template_filter(human_duration, "age")  # "3 h 05 min", "42 s"


@bp.errorhandler(QueueError)
def queue_error(exc: QueueError) -> tuple[str, int]:
    """Service refusals (403, 404, 409...) as the error page, the same status as the API."""
    return render_template("error.html", status=exc.status, detail=exc.detail), exc.status
