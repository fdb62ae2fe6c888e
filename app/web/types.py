"""The job types page (admins): jobs per status, the limits claims obey and where they come
from, a pause/resume switch and the limits form. The same use cases and request model as
``PATCH /types/{type}``, audited alike."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, url_for
from werkzeug.wrappers import Response

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.rules import type_limits
from app.queue.rules.policy import Action
from app.queue.usecases import job_types, partition_figures
from app.queue.usecases.job_types import TypeChange, TypeView
from app.queue.vocabulary.errors import NotFound, QueueError
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce
from app.web import audited
from app.web.forms import TypeLimitsForm
from app.web.guard import current_actor, require_login, requires

bp = Blueprint("types", __name__, url_prefix="/ui/types")
bp.before_request(require_login)


def _prefix(name: str) -> str:
    """Each card's form gets its own field ids (the type's place in JOB_TYPES)."""
    job_types_ = queue_settings().job_types
    if name not in job_types_:
        raise NotFound(f"{name!r} is not a configured job type (JOB_TYPES)")
    return f"type-{job_types_.index(name)}"


_LIMIT_FIELDS = (
    "max_running",
    "rate_limit",
    "max_run_seconds",
    "partition_max_running",
    "partition_rate_limit",
)


def _form(view: TypeView) -> TypeLimitsForm:
    """The limits form showing the type's overrides (empty where the configuration applies)."""
    override = view.override
    shown = {
        name: "" if override is None or getattr(override, name) is None else getattr(override, name)
        for name in _LIMIT_FIELDS
    }
    return TypeLimitsForm(formdata=None, prefix=_prefix(view.type), **shown)


def _page(failed: tuple[str, TypeLimitsForm] | None = None, status: int = 200) -> tuple[str, int]:
    with db.read() as conn:
        views = job_types.list_types(conn, current_actor(), queue_settings())
        names = [view.type for view in views]
        partitions = partition_figures.busiest(conn, names, utcnow())
    forms = {view.type: _form(view) for view in views}
    if failed is not None:
        forms[failed[0]] = failed[1]
    page = render_template(
        "types/index.html",
        types=views,
        forms=forms,
        partitions=partitions,
        due_sample=partition_figures.DUE_SAMPLE,
    )
    return page, status


@bp.get("/")
@requires(Action.MANAGE_TYPES)
def index() -> tuple[str, int]:
    return _page()


def _change(name: str, fields: dict[str, Any]) -> TypeView:
    """Apply and audit a change, as the API does."""
    request = TypeChange.parse(fields, queue_settings())
    with db.transaction() as conn:
        changed = job_types.change(
            conn,
            current_actor(),
            queue_settings(),
            name,
            request,
            now=utcnow(),
            origin=audited.origin(),
        )
        announce(changed.effects)
    return changed.value


def _switch(name: str, paused: bool) -> Response:
    _change(name, {"paused": paused})
    if paused:
        flash(f"{name} paused: claims hand out none of its jobs until it is resumed.", "success")
    else:
        flash(f"{name} resumed.", "success")
    return redirect(url_for(".index"))


@bp.post("/<job_type>/pause")
@requires(Action.MANAGE_TYPES)
def pause(job_type: str) -> Response:
    return _switch(job_type, True)


@bp.post("/<job_type>/resume")
@requires(Action.MANAGE_TYPES)
def resume(job_type: str) -> Response:
    return _switch(job_type, False)


def _number(text: str) -> int | str:
    """A whole number as the API gets it; anything else as typed, for the model to refuse."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else text


@bp.post("/<job_type>/limits")
@requires(Action.MANAGE_TYPES)
def limits(job_type: str) -> Response | tuple[str, int]:
    form = TypeLimitsForm(prefix=_prefix(job_type))
    if not form.validate():
        return _page((job_type, form), 422)
    typed = {name: (getattr(form, name).data or "").strip() for name in _LIMIT_FIELDS}
    fields: dict[str, Any] = {
        name: (text if name.endswith("rate_limit") else _number(text)) if text else None
        for name, text in typed.items()
    }
    try:
        _change(job_type, fields)
    except QueueError as exc:
        if exc.status != 422:
            raise
        for name, message in exc.errors.items():
            field = getattr(form, name, None)
            if field is not None:  # a form clears a limit by leaving it empty (its hint says)
                field.errors = [*field.errors, message.removesuffix(type_limits.NO_LIMIT)]
        return _page((job_type, form), 422)
    flash(f"Limits of {job_type} saved.", "success")
    return redirect(url_for(".index"))
