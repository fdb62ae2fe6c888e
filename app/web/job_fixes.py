"""The job page's "Edit and retry" form (admins): the form becomes the body the API's retry
takes, validated by the same request model, and its refusals are shown in the form."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, flash, g, redirect, url_for
from werkzeug.wrappers import Response

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.job_requests import RetryBody
from app.queue.rules.policy import Action
from app.queue.usecases import job_actions
from app.queue.vocabulary.errors import Conflict, InvalidInput
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce
from app.web import audited
from app.web.forms import EditRetryForm, payload_value, whole_or_text
from app.web.guard import require_login, requires
from app.web.htmx import render
from app.web.pages import action_done, detail_context, put_errors

bp = Blueprint("fixes", __name__, url_prefix="/ui")
bp.before_request(require_login)


def _body(form: EditRetryForm) -> dict[str, Any]:
    """The form as the JSON body the API would get; a payload that is not JSON is a 422."""
    body: dict[str, Any] = {
        "payload": payload_value(form.payload.data, current_app.config["MAX_JSON_DEPTH"]),
        "priority": form.priority.data,
        "max_retries": whole_or_text(form.max_retries.data),
    }
    if (form.reason.data or "").strip():
        body["reason"] = form.reason.data
    return body


@bp.post("/jobs/<id:job_id>/edit-retry")
@requires(Action.RETRY)
def edit_retry(job_id: int) -> Response:
    """Retry the job with the form's fields; on a refusal, the job page with the form open
    and each field's error under it (422)."""
    form = EditRetryForm()
    try:
        edit = RetryBody.parse(_body(form), queue_settings()).to_edit()
        with db.transaction() as conn:
            retried = job_actions.retry(
                conn, g.actor, job_id, now=utcnow(), origin=audited.origin(), edit=edit
            )
            announce(retried.effects)
    except InvalidInput as exc:
        put_errors(form, exc.errors)
        context = detail_context(job_id, g.actor, edit_form=form)
        return render("jobs/detail.html", "jobs/_detail_partial.html", status=422, **context)
    except Conflict as exc:
        return action_done(job_id, exc.detail, "error")
    # The whole page, not the panel: the payload it shows below the panel changed too.
    flash(f"Job {job_id} is queued again with your changes.", "success")
    return redirect(url_for("web.pages.job", job_id=job_id))
