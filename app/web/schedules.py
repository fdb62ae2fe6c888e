"""The schedules page (admins): the list with the next fire times, a create form, and the
enable, disable, run-now and delete buttons. The same use cases and request models as the API."""

from __future__ import annotations

from typing import Any
from zoneinfo import available_timezones

from flask import Blueprint, current_app, flash, redirect, render_template, url_for
from werkzeug.wrappers import Response

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.schedules import ScheduleCreate, ScheduleUpdate, parse
from app.queue.contract.strictjson import MalformedJSON, decode_json
from app.queue.rules import cron
from app.queue.rules.policy import Action
from app.queue.usecases import schedules
from app.queue.vocabulary.errors import InvalidInput, QueueError
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce
from app.web import audited
from app.web.forms import ConfirmForm, ScheduleForm
from app.web.guard import current_actor, require_login, requires

bp = Blueprint("schedules", __name__, url_prefix="/ui/schedules")


bp.before_request(require_login)


def _page(form: ScheduleForm | None = None, status: int = 200) -> tuple[str, int]:
    with db.read() as conn:
        found = schedules.list_schedules(conn, current_actor())
    now = utcnow()
    form = form or ScheduleForm(formdata=None)
    form.type.choices = list(queue_settings().job_types)
    return render_template(
        "schedules/index.html",
        schedules=found,
        next_runs={
            s.id: [(at, at.astimezone(cron.zone(s.timezone))) for at in schedules.next_runs(s, now)]
            for s in found
        },
        described={s.id: cron.describe(s.cron) for s in found},
        form=form,
        confirm_form=ConfirmForm(),
        timezones=sorted(available_timezones()),
    ), status


@bp.get("/")
@requires(Action.MANAGE_SCHEDULES)
def index() -> tuple[str, int]:
    return _page()


def _body(form: ScheduleForm) -> dict[str, Any]:
    """The form as the JSON body the API would get; a payload that is not JSON is a 422."""
    try:
        payload = decode_json(form.payload.data or "{}", current_app.config["MAX_JSON_DEPTH"])
    except MalformedJSON as exc:
        raise InvalidInput({"payload": f"is not valid JSON ({exc})"}) from None
    return {
        "name": form.name.data or "",
        "cron": form.cron.data or "",
        "timezone": form.timezone.data or "UTC",
        "type": form.type.data or "",
        "priority": form.priority.data,
        "payload": payload,
        "catch_up": form.catch_up.data,
        "enabled": bool(form.enabled.data),
        **({"partition": form.partition.data} if form.partition.data else {}),
    }


@bp.post("/")
@requires(Action.MANAGE_SCHEDULES)
def create() -> Response | tuple[str, int]:
    form = ScheduleForm()
    if not form.validate():
        return _page(form, 422)
    try:
        request = parse(ScheduleCreate, _body(form), queue_settings())
        with db.transaction() as conn:
            schedule = schedules.create(
                conn, current_actor(), request, now=utcnow(), origin=audited.origin()
            )
    except QueueError as exc:
        for name, message in (exc.errors or {"name": exc.detail}).items():
            field = form._fields.get(name)
            if field is not None:
                field.errors = [*field.errors, message]
            else:
                form.form_errors.append(f"{name}: {message}")
        return _page(form, exc.status)
    flash(f"Schedule {schedule.name} created.", "success")
    return redirect(url_for(".index"))


def _set_enabled(schedule_id: int, enabled: bool) -> Response:
    request = ScheduleUpdate(enabled=enabled)
    with db.transaction() as conn:
        schedule = schedules.update(
            conn, current_actor(), schedule_id, request, now=utcnow(), origin=audited.origin()
        )
    flash(f"Schedule {schedule.name} {'enabled' if enabled else 'disabled'}.", "success")
    return redirect(url_for(".index"))


@bp.post("/<id:schedule_id>/enable")
@requires(Action.MANAGE_SCHEDULES)
def enable(schedule_id: int) -> Response:
    return _set_enabled(schedule_id, True)


@bp.post("/<id:schedule_id>/disable")
@requires(Action.MANAGE_SCHEDULES)
def disable(schedule_id: int) -> Response:
    return _set_enabled(schedule_id, False)


@bp.post("/<id:schedule_id>/run")
@requires(Action.MANAGE_SCHEDULES)
def run(schedule_id: int) -> Response:
    try:
        with db.transaction() as conn:
            enqueued = schedules.run_now(
                conn,
                current_actor(),
                schedule_id,
                now=utcnow(),
                settings=queue_settings(),
                origin=audited.origin(),
            )
            announce(enqueued.effects)
    except QueueError as exc:
        if exc.status in (403, 404):
            raise
        flash(exc.detail, "error")
        return redirect(url_for(".index"))
    flash(f"Job {enqueued.value.id} enqueued.", "success")
    return redirect(url_for(".index"))


@bp.post("/<id:schedule_id>/delete")
@requires(Action.MANAGE_SCHEDULES)
def delete(schedule_id: int) -> Response:
    with db.transaction() as conn:
        schedule = schedules.delete(
            conn, current_actor(), schedule_id, now=utcnow(), origin=audited.origin()
        )
    flash(f"Schedule {schedule.name} deleted; the jobs it made stay.", "success")
    return redirect(url_for(".index"))
