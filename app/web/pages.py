"""The signed-in pages: dashboard, job list, job page, enqueue form, cancel, retry and run now."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from flask import (
    Blueprint,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_wtf import FlaskForm
from werkzeug.datastructures import MultiDict
from werkzeug.wrappers import Response

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.job_requests import EnqueueBody
from app.queue.contract.list_pages import DEFAULT_PAGE_SIZE, PAGE_SIZES, PageQuery
from app.queue.rules import workflows
from app.queue.rules.policy import Action, can, priority_cap
from app.queue.usecases import (
    attempt_logs,
    children,
    enqueueing,
    explain,
    job_actions,
    job_types,
    listing,
    reading,
    stats,
)
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.effects import Changed
from app.queue.vocabulary.errors import Conflict, Forbidden, InvalidInput
from app.queue.vocabulary.job_fields import PARTITION
from app.queue.vocabulary.jobs import Job, JobFilters
from app.queue.vocabulary.orders import NEWEST_FIRST
from app.queue.vocabulary.states import PRIORITIES, TERMINAL, JobStatus
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce
from app.web import audited
from app.web.charts import minute_chart
from app.web.forms import (
    ConfirmForm,
    EditRetryForm,
    EnqueueForm,
    payload_value,
    whole_or_text,
)
from app.web.guard import require_login, requires
from app.web.htmx import is_htmx, render

bp = Blueprint("pages", __name__, url_prefix="/ui")
STOP_POLLING = 286  # htmx stops an `every` trigger when it gets this status
CHILDREN_SHOWN = 50  # children listed on a job page (the oldest)
RUN_AT_EXAMPLE = "2030-01-02 15:04"  # the form's run time: its hint and its error show this

bp.before_request(require_login)


@bp.get("/")
@requires(Action.VIEW_JOBS)
def dashboard() -> str:
    actor = g.actor
    with db.read() as conn:
        paused = job_types.paused(conn, queue_settings())
        figures = stats.dashboard(conn, actor, now=utcnow(), paused=paused)
    return render_template(
        "dashboard/index.html", figures=figures, chart=minute_chart(figures.per_minute)
    )


def _list_args() -> MultiDict[str, str]:
    """The query string without empty values (an empty filter field means "any")."""
    return MultiDict([(k, v) for k, v in request.args.items(multi=True) if v != ""])


# The orders the page offers (``orders``), with the statuses an index keeps each within.
SORTS = (
    ("", "Newest first"),  # the default: left out of the URL
    ("created", "Oldest first"),
    ("-priority", "Priority, highest first (pending)"),
    ("priority", "Priority, lowest first (pending)"),
    ("run_at", "Run time, soonest first (pending)"),
    ("-run_at", "Run time, latest first (pending)"),
    ("-updated", "Last change, latest first (running, finished)"),
    ("updated", "Last change, earliest first (running, finished)"),
)


@bp.get("/jobs")
@requires(Action.VIEW_JOBS)
def jobs() -> Response:
    actor = g.actor
    args = _list_args()
    live = args.get("live") == "1"
    errors: dict[str, str] = {}
    query = args.copy()
    query.poplist("live")
    filters = JobFilters(limit=DEFAULT_PAGE_SIZE)
    page = total = None
    try:
        filters = PageQuery.from_args(query, queue_settings()).to_filters()
        with db.read() as conn:
            page = listing.page(conn, actor, filters)
            total = listing.total(conn, actor, filters)
    except InvalidInput as exc:
        errors = exc.errors
    base: dict[str, Any] = {k: v for k, v in args.items() if k != "cursor"}

    def at(cursor: str | None) -> str | None:
        return url_for(".jobs", **base, cursor=cursor) if cursor else None

    return render(
        "jobs/list.html",
        "jobs/_table_partial.html",
        status=422 if errors else 200,
        jobs=page.jobs if page else [],
        total=total,
        errors=errors,
        args=args,
        live=live,
        filtered=any(
            k in args for k in ("status", "type", "priority", "q", "partition", "payload")
        ),
        partition_length=PARTITION.length,
        sort=filters.sort,
        sort_choice="" if filters.sort == NEWEST_FIRST else str(filters.sort),
        sorts=SORTS,
        page_sizes=PAGE_SIZES,
        first_url=url_for(".jobs", **base) if page and page.prev_cursor else None,
        next_url=at(page.next_cursor if page else None),
        prev_url=at(page.prev_cursor if page else None),
        self_url=request.full_path.rstrip("?"),
        job_types=queue_settings().job_types,
        statuses=list(JobStatus),
        priorities=list(PRIORITIES),
        poll_seconds=current_app.config["UI_POLL_SECONDS"],
    )


def detail_context(
    job_id: int, actor: Actor, *, with_logs: bool = False, **extra: Any
) -> dict[str, Any]:
    """What the job page and its panel show of ``job_id`` to ``actor`` (with the attempts' logs
    where ``with_logs`` and the actor may read them); ``extra`` adds to it or replaces (a
    notice, an edit form with its errors)."""
    idle = timedelta(seconds=current_app.config["EXPLAIN_IDLE_WORKER_SECONDS"])
    now, settings = utcnow(), queue_settings()
    with db.read() as conn:
        explanation = explain.explain(
            conn, actor, job_id, now=now, idle_after=idle, settings=settings
        )
        job = explanation.job
        runs_now = can(actor, Action.RUN_NOW, job) and job.run_at > now
        if runs_now:  # not when more than time holds it: the API would refuse it
            runs_now = explain.held_beyond_time(conn, job, now=now, settings=settings) is None
        events = reading.list_events(conn, actor, job_id)
        parents: list[Job] = []
        dependents: list[Job] = []
        if job.depends_on or job.has_dependents:
            parents, dependents = workflows.relatives(conn, actor, job)
        spawned = children.children_of(conn, actor, job_id, limit=CHILDREN_SHOWN + 1)
        spawned_by = children.parent_of(conn, actor, job)
        logs = attempt_logs.shown(conn, actor, job_id) if with_logs else None
    return {
        "logs": logs,
        "spawned_by": spawned_by,
        "parents": parents,
        "dependents": dependents,
        "children": spawned[:CHILDREN_SHOWN],
        "more_children": len(spawned) > CHILDREN_SHOWN,
        "job": job,
        "reasons": explanation.reasons,
        "events": events,
        "live": job.status not in TERMINAL,
        "payload": pretty(job.payload),
        "result": pretty(job.result) if job.result is not None else None,
        "confirm_form": ConfirmForm(),
        "runs_now": runs_now,
        "edit_form": EditRetryForm.for_job(job, pretty(job.payload)),
        "poll_seconds": current_app.config["UI_POLL_SECONDS"],
        **extra,
    }


def pretty(value: Any) -> str:
    """JSON for people: indented, keys sorted, non-ASCII kept (the template escapes it)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


@bp.get("/jobs/<id:job_id>")
@requires(Action.VIEW_JOBS)
def job(job_id: int) -> Response:
    actor = g.actor
    context = detail_context(job_id, actor, with_logs=not is_htmx())  # the page's, not polled
    response = render("jobs/detail.html", "jobs/_detail_partial.html", **context)
    if is_htmx() and not context["live"]:
        response.status_code = STOP_POLLING
    return response


@bp.get("/groups/<id:group_id>")
@requires(Action.VIEW_GROUPS)
def group(group_id: int) -> Response:
    """A group's progress, refreshed while members are unfinished."""
    with db.read() as conn:
        found = workflows.get_group(conn, g.actor, group_id)
    poll = current_app.config["UI_POLL_SECONDS"]
    response = render("groups/detail.html", "groups/_progress.html", group=found, poll_seconds=poll)
    if is_htmx() and found.finished:
        response.status_code = STOP_POLLING
    return response


def action_done(job_id: int, message: str, category: str) -> Response:
    """htmx gets the refreshed job panel; a plain form post is redirected to the job page."""
    if is_htmx():
        context = detail_context(job_id, g.actor, notice=(category, message))
        return render("jobs/detail.html", "jobs/_detail_partial.html", **context)
    flash(message, category)
    return redirect(url_for(".job", job_id=job_id))


def _act(job_id: int, action: Callable[..., Changed[Job]], done: str) -> Response:
    """Run a use case on a job (it audits itself); a refusal by the job's state
    (Conflict) is shown on the job, any other error (Forbidden, NotFound) is the error page."""
    try:
        with db.transaction() as conn:
            announce(action(conn, g.actor, job_id, now=utcnow(), origin=audited.origin()).effects)
    except Conflict as exc:
        return action_done(job_id, exc.detail, "error")
    return action_done(job_id, done, "success")


@bp.post("/jobs/<id:job_id>/cancel")
@requires(Action.CANCEL)
def cancel(job_id: int) -> Response:
    return _act(job_id, job_actions.cancel, f"Job {job_id} cancelled.")


@bp.post("/jobs/<id:job_id>/retry")
@requires(Action.RETRY)
def retry(job_id: int) -> Response:
    return _act(job_id, job_actions.retry, f"Job {job_id} is queued again.")


@bp.post("/jobs/<id:job_id>/run-now")
@requires(Action.RUN_NOW)
def run_now(job_id: int) -> Response:
    run = partial(job_actions.run_now, settings=queue_settings())
    return _act(job_id, run, f"Job {job_id} is due now.")


def _enqueue_body(form: EnqueueForm, errors: dict[str, str]) -> dict[str, Any]:
    """The form as the JSON body the API would get; parse problems go to ``errors``."""
    body: dict[str, Any] = {
        "type": form.type.data,
        "priority": form.priority.data,
        "max_retries": whole_or_text(form.max_retries.data),
    }
    try:
        body["payload"] = payload_value(form.payload.data, current_app.config["MAX_JSON_DEPTH"])
    except InvalidInput as exc:
        errors |= exc.errors
    else:
        if not isinstance(body["payload"], dict):
            errors["payload"] = 'must be a JSON object, e.g. {"to": "someone@example.com"}'
    if form.idempotency_key.data:
        body["idempotency_key"] = form.idempotency_key.data
    if form.partition.data:
        body["partition"] = form.partition.data
    if form.run_at.data:
        run_at = _utc(form.run_at.data.strip())
        if run_at is None:
            errors["run_at"] = f"must be a 24-hour UTC time like {RUN_AT_EXAMPLE}"
        else:
            body["run_at"] = run_at
    if parents := (form.depends_on.data or "").replace(",", " ").split():
        if all(p.isascii() and p.isdigit() for p in parents):
            body["depends_on"] = [int(p) for p in parents]
        else:
            errors["depends_on"] = "must be job ids separated by commas or spaces"
    return body


def _utc(value: str) -> str | None:
    """A time as typed in the form (``2030-01-02 15:04``, UTC as the form says, or ISO 8601
    with an offset), as the API takes it; None when it is not a time."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).isoformat()


@bp.route("/jobs/new", methods=["GET", "POST"])
@requires(Action.ENQUEUE)
def new_job() -> Response | tuple[str, int]:
    actor = g.actor
    settings = queue_settings()
    form = EnqueueForm()
    form.type.choices = list(settings.job_types)
    allowed = [label for label, number in PRIORITIES.items() if number <= priority_cap(actor)]
    form.priority.choices = allowed
    status = 200
    if request.method == "POST":
        status = 422
        if form.validate():
            outcome = _enqueue(form, actor)
            if isinstance(outcome, Response):
                return outcome
            status = outcome
    return render_template(
        "jobs/new.html",
        form=form,
        cap=allowed[-1],
        max_payload=settings.max_payload_bytes,
        run_at_example=RUN_AT_EXAMPLE,
        partition_rule=PARTITION.rule.removeprefix("must be "),
    ), status


def _enqueue(form: EnqueueForm, actor: Actor) -> Response | int:
    """Enqueue the form's job and redirect to it, or put the refusals on the form and return
    the status of the page that shows them."""
    errors: dict[str, str] = {}
    body = _enqueue_body(form, errors)
    try:  # every field's refusal at once: the form's own for what it read first
        enqueue_body = EnqueueBody.parse(body, queue_settings())
    except InvalidInput as exc:
        errors = exc.errors | errors
    if errors:
        put_errors(form, errors)
        return 422
    try:
        with db.transaction() as conn:
            enqueued = enqueueing.enqueue(conn, actor, enqueue_body.to_request(), now=utcnow())
            announce(enqueued.effects)
        job, created = enqueued.value
    except InvalidInput as exc:
        put_errors(form, exc.errors)
        return 422
    except Forbidden as exc:
        form.priority.errors = [exc.detail]
        return 403
    if created:
        flash(f"Job {job.id} enqueued.", "success")
    else:
        flash(f"Job {job.id} already existed with this idempotency key.", "info")
    return redirect(url_for(".job", job_id=job.id))


def put_errors(form: FlaskForm, errors: dict[str, str]) -> None:
    """Show each refusal under its field (one the form lacks, above the form)."""
    for name, message in errors.items():
        field = getattr(form, name, None) if name in form else None
        if field is not None:
            field.errors = [*field.errors, message]
        else:
            form.form_errors.append(f"{name}: {message}")
