"""The jobs page's bulk actions (admins): preview what a filter selects, then confirm it with a
reason, through the same request models and operations as ``POST /jobs/bulk``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from app.infra.queue_settings import queue_settings
from app.queue.contract.bulk import MAX_REASON_LENGTH, BulkBody, BulkChoice
from app.queue.contract.payload_search import decode_needle
from app.queue.rules.policy import Action
from app.queue.usecases import bulk_runs
from app.queue.usecases.bulk import APPLIES_TO, Verb
from app.queue.vocabulary.errors import Conflict, InvalidInput
from app.queue.vocabulary.states import JobStatus
from app.web import audited
from app.web.forms import BulkForm
from app.web.guard import require_login, requires

bp = Blueprint("bulk", __name__, url_prefix="/ui")
bp.before_request(require_login)

FILTERS = ("status", "type", "priority", "q", "payload")  # the jobs page's filters
DONE = {Verb.CANCEL: "cancelled", Verb.RETRY: "queued again", Verb.DELETE: "deleted"}
ABLE = {Verb.CANCEL: "cancelled", Verb.RETRY: "retried", Verb.DELETE: "deleted"}


@bp.app_template_global()
def bulk_verbs() -> list[tuple[str, list[str]]]:
    """Each bulk action and the statuses it applies to, in lifecycle order (the jobs page)."""
    return [(verb.value, [s.value for s in JobStatus if s in APPLIES_TO[verb]]) for verb in Verb]


def _choice(source: Mapping[str, str]) -> dict[str, Any]:
    """The query or form as the API's body: the action and the filters that were given."""
    return {
        "action": source.get("action", ""),
        "filter": {name: source[name] for name in FILTERS if source.get(name)},
    }


def _as_body(data: dict[str, Any]) -> dict[str, Any]:
    """``_choice``'s data as the API's body: the payload search's text as the JSON object it
    holds (InvalidInput on ``payload`` when it holds none)."""
    given = data["filter"]
    if "payload" not in given:
        return data
    try:
        needle = decode_needle(given["payload"], queue_settings().max_json_depth)
    except ValueError as exc:
        raise InvalidInput({"payload": str(exc)}) from None
    return {**data, "filter": {**given, "payload": needle}}


def _page(
    data: dict[str, Any],
    *,
    status: int = 200,
    errors: Mapping[str, str] | None = None,
    notice: str | None = None,
    reason: str = "",
) -> tuple[str, int]:
    """The preview of ``data``'s choice with its confirmation form, or why there is none."""
    errors = dict(errors or {})
    verb = found = None
    try:
        choice = BulkChoice.parse(_as_body(data), queue_settings())
        verb = Verb(choice.action)
        found = bulk_runs.preview(g.actor, choice.to_selection())
    except InvalidInput as exc:  # the page names its fields without the API's "filter."
        errors |= {name.removeprefix("filter."): text for name, text in exc.errors.items()}
    form = BulkForm(
        formdata=None,
        data={
            **data["filter"],
            "action": data["action"],
            "expect_count": found.count if found else "",
            "reason": reason,
        },
    )
    form.reason.errors = [errors.pop("reason")] if "reason" in errors else []
    return render_template(
        "jobs/bulk.html",
        verb=verb,
        done=DONE[verb] if verb else None,
        able=ABLE[verb] if verb else None,
        applies_to=dict(bulk_verbs()).get(verb or "", []),
        given=data["filter"],
        found=found,
        sample=found.sample if found else [],
        form=form,
        max_reason=MAX_REASON_LENGTH,
        errors=errors,
        notice=notice,
        back_url=url_for("web.pages.jobs", **data["filter"]),
    ), 422 if errors or form.reason.errors else status


@bp.get("/jobs/bulk")
@requires(Action.BULK_JOBS)
def preview() -> tuple[str, int]:
    return _page(_choice(request.args))


@bp.post("/jobs/bulk")
@requires(Action.BULK_JOBS)
def apply() -> Response | tuple[str, int]:
    form = BulkForm()
    data = _choice(request.form)
    reason = form.reason.data or ""
    count = form.expect_count.data or ""
    # The model wants a JSON integer; anything else it refuses with its own message.
    expect = int(count) if count.isascii() and count.isdigit() and len(count) < 19 else count
    try:
        wanted = {**_as_body(data), "reason": reason, "expect_count": expect}
        body = BulkBody.parse(wanted, queue_settings())
        expected = body.expect_count
        assert expected is not None  # always sent, and "" is refused
        done = bulk_runs.apply(
            g.actor,
            body.to_selection(),
            reason=body.reason,
            expect_count=expected,
            origin=audited.origin(),
        )
    except Conflict as exc:  # the count changed (StaleCount), or another apply is running
        return _page(data, status=409, notice=exc.detail, reason=reason)
    except InvalidInput as exc:
        return _page(data, errors=exc.errors, reason=reason)
    message = f"Operation {done.operation}: {done.affected} job(s) {DONE[Verb(body.action)]}."
    if done.affected < expected:
        message += f" {expected - done.affected} changed meanwhile and were left as they were."
    flash(message, "success")
    return redirect(url_for("web.pages.jobs", **data["filter"]))
