"""The JSON API's answers, built as their response models from the domain's values: the models
that the API document shows are the ones that write the answers (``app.api.respond``).

Each function is one answer, as an admin would see it: what only admins may see (``error``)
is left out for anyone else where every answer is written, ``app.api.respond``. A field the
model gives a default is sent only when the function sets it (``secrets`` in a claim,
``duplicate`` in an enqueue), and the values are set in the model's field order, which is the
order they are sent in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from app.queue.contract.bulk import BulkApplied, BulkPreview
from app.queue.contract.control_responses import (
    ExplanationOut,
    ReasonOut,
    ScheduleList,
    ScheduleOut,
    TypeList,
    TypeOut,
)
from app.queue.contract.job_responses import (
    BeatResult,
    BeatResults,
    ClaimedJobs,
    CreatedJobs,
    EnqueueResult,
    EnqueueResults,
    EventList,
    EventOut,
    FinishResult,
    FinishResults,
    GroupCallbacks,
    GroupOut,
    JobList,
    JobOut,
    ParentOut,
    RefusedCallbacks,
    ResponseModel,
    TraceOut,
)
from app.queue.rules import cron, uniqueness
from app.queue.rules.type_limits import RateLimit
from app.queue.rules.workflows import GroupView
from app.queue.usecases import schedules
from app.queue.usecases.bulk import Preview
from app.queue.usecases.explain import Explanation
from app.queue.usecases.job_types import TypeView
from app.queue.vocabulary.errors import QueueError
from app.queue.vocabulary.jobs import (
    Beat,
    EnqueueRequest,
    Event,
    Job,
    JobPage,
    Outcome,
    ParentResult,
)
from app.queue.vocabulary.schedules import Schedule
from app.queue.vocabulary.timeutil import iso

Item = TypeVar("Item", bound=ResponseModel)
# A claim's jobs, the secrets opened for them and their parents' results, by job id.
Claimed = tuple[Sequence[Job], Mapping[int, dict[str, str]], Mapping[int, list[ParentResult]]]
CALLBACKS = ("on_complete", "on_success")  # a group's callbacks, in the answers' order


def job_out(
    job: Job,
    *,
    secrets: dict[str, str] | None = None,
    parents: Sequence[ParentResult] | None = None,
    duplicate: bool = False,
) -> JobOut:
    """A job: ``secrets`` only in the answer of the claim that opened them, ``parents`` only in
    a claim's answer of a job with ``depends_on``, ``duplicate`` only in an enqueue's answer."""
    values: dict[str, Any] = {
        "id": job.id,
        "type": job.type,
        "payload": job.payload,
        "priority": job.priority_label,
        "status": job.status,
        "retry_count": job.retry_count,
        "max_retries": job.max_retries,
        "attempt": job.attempts,
        "idempotency_key": job.idempotency_key,
        "run_at": iso(job.run_at),
        "claimed_at": iso(job.claimed_at),
        "lease_expires_at": iso(job.lease_expires_at),
        "worker_id": job.worker_id,
        "progress": job.progress,
        "progress_message": job.progress_message,
        "result": job.result,
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        "finished_at": iso(job.finished_at),
        "secret_names": job.secret_name_list,
        "deadline_at": iso(job.deadline_at),
        "depends_on": job.depends_on or [],
        "waiting_for": job.waiting_for or [],
        # A group's callback belongs to no group but is shown with the one it is the callback of.
        "group_id": job.group_id if job.callback_of is None else job.callback_of,
        "parent_id": job.parent_id,
        "trace": None
        if job.traceparent is None
        else TraceOut.built({"traceparent": job.traceparent, "tracestate": job.tracestate}),
        "partition": job.partition,
    }
    values["error"] = job.error
    if secrets is not None:
        values["secrets"] = secrets
    if parents is not None:
        values["parents"] = [_parent_out(parent) for parent in parents]
    if duplicate:
        values["duplicate"] = True
    return JobOut.built(values)


def job_page_out(page: JobPage) -> JobList:
    """One page of a job listing, newest first, with the cursor of the next (older) page."""
    jobs = [job_out(job) for job in page.jobs]
    return JobList.built({"jobs": jobs, "next_cursor": page.next_cursor})


def claimed_out(
    jobs: Sequence[Job],
    secrets: Mapping[int, dict[str, str]],
    parents: Mapping[int, list[ParentResult]],
    *,
    many: bool,
) -> JobOut | ClaimedJobs:
    """A claim's answer: the job, or with ``many`` (the claim gave ``max_jobs``) all of them in
    claim order; each with its secrets opened, when it has some, and its parents' results,
    when it depends on others."""
    out = [_claimed_out(job, secrets, parents) for job in jobs]
    return ClaimedJobs.built({"jobs": out}) if many else out[0]


def _claimed_out(
    job: Job, secrets: Mapping[int, dict[str, str]], parents: Mapping[int, list[ParentResult]]
) -> JobOut:
    return job_out(job, secrets=secrets.get(job.id), parents=parents.get(job.id))


def _parent_out(parent: ParentResult) -> ParentOut:
    values = {"id": parent.id, "type": parent.type, "status": parent.status}
    return ParentOut.built(values | {"result": parent.result})


def created_out(
    requests: Sequence[EnqueueRequest],
    added: Sequence[tuple[Job, bool]],
    *,
    grouped: bool = False,
) -> CreatedJobs:
    """A batch enqueue's answer: the jobs in request order and which of them are new; when the
    batch formed a group, the group (the replayed jobs' group for a replay)."""
    values: dict[str, Any] = {
        "jobs": [
            job_out(job, duplicate=uniqueness.is_duplicate(wanted, job, created))
            for wanted, (job, created) in zip(requests, added, strict=True)
        ],
        "created": [created for _, created in added],
    }
    if grouped:
        values["group_id"] = next((job.group_id for job, _ in added if job.group_id), None)
    return CreatedJobs.built(values)


def each_out(
    items: Sequence[EnqueueRequest | QueueError],
    answers: Sequence[tuple[Job, bool] | QueueError],
) -> EnqueueResults:
    """A batch enqueued with ``"atomic": false``: each item's answer in request order, as
    ``POST /jobs`` would give it (201 or 200 with the job, else the problem's detail and
    fields)."""
    results = []
    for item, answer in zip(items, answers, strict=True):
        if isinstance(answer, QueueError):
            values: dict[str, Any] = {"status": answer.status, "detail": answer.detail}
            if answer.errors:
                values["errors"] = answer.errors
        else:
            job, created = answer
            assert isinstance(item, EnqueueRequest)  # an answered item was a request
            duplicate = uniqueness.is_duplicate(item, job, created)
            out = job_out(job, duplicate=duplicate)
            values = {"status": 201 if created else 200, "job": out}
        results.append(EnqueueResult.built(values))
    return EnqueueResults.built({"results": results})


def _per_item(
    model: type[Item],
    ids: Iterable[int],
    answers: Sequence[Job | QueueError],
    answered: Callable[[Job], dict[str, Any]],
) -> list[Item]:
    """Each item's answer of a batch, in request order: 200 with what ``answered`` says of the
    job it left, or the status and the reason its single route would have refused it with."""
    return [
        model.built(
            {"id": item_id, "status": answer.status, "detail": answer.detail}
            if isinstance(answer, QueueError)
            else {"id": item_id, "status": 200, **answered(answer)}
        )
        for item_id, answer in zip(ids, answers, strict=True)
    ]


def finish_out(
    outcomes: Sequence[Outcome],
    answers: Sequence[Job | QueueError],
    *,
    claimed: Claimed | None = None,
) -> FinishResults:
    """Each outcome's answer, in request order: the job it left, or why it was refused; with
    ``claimed`` (the body claimed), the jobs claimed, the secrets of those that have some and
    the parents' results of those that depend on others."""

    def answered(job: Job) -> dict[str, Any]:
        return {"job": job_out(job)}

    ids = (outcome.job_id for outcome in outcomes)
    values: dict[str, Any] = {"results": _per_item(FinishResult, ids, answers, answered)}
    if claimed is not None:
        jobs, secrets, parents = claimed
        values["jobs"] = [_claimed_out(job, secrets, parents) for job in jobs]
    return FinishResults.built(values)


def beats_out(beats: Sequence[Beat], answers: Sequence[Job | QueueError]) -> BeatResults:
    """Each heartbeat's answer, in request order: the lease's new end, or why it was refused."""

    def answered(job: Job) -> dict[str, Any]:
        return {"lease_expires_at": iso(job.lease_expires_at)}

    ids = (beat.job_id for beat in beats)
    return BeatResults.built({"results": _per_item(BeatResult, ids, answers, answered)})


def _event_out(event: Event) -> EventOut:
    values: dict[str, Any] = {
        "id": event.id,
        "at": iso(event.at),
        "kind": event.kind,
        "from_status": event.from_status,
        "to_status": event.to_status,
        "actor": event.actor,
        "attempt": event.attempt,
        "note": event.note,
        "error": event.error,
    }
    return EventOut.built(values)


def events_out(events: Sequence[Event]) -> EventList:
    """A job's events, oldest first."""
    return EventList.built({"events": [_event_out(event) for event in events]})


def explanation_out(found: Explanation) -> ExplanationOut:
    """Why a job is where it is: its status and the reasons, in the order people read them."""
    reasons = [
        ReasonOut.built({"code": reason.code, "detail": reason.detail, "figures": reason.figures})
        for reason in found.reasons
    ]
    return ExplanationOut.built({"status": found.job.status, "reasons": reasons})


def group_out(group: GroupView) -> GroupOut:
    """A group: its members per status, whether all finished, the ids of its callbacks."""
    callbacks = GroupCallbacks.built(
        {"on_complete": group.on_complete, "on_success": group.on_success}
    )
    return GroupOut.built(
        {
            "id": group.id,
            "name": group.name,
            "total": group.total,
            "counts": group.counts,
            "finished": group.finished,
            "callbacks": callbacks,
            "callbacks_refused": RefusedCallbacks.built(
                {k: group.callbacks_refused[k] for k in CALLBACKS if k in group.callbacks_refused}
            ),
        }
    )


def _text(rate: RateLimit | None) -> str | None:
    return None if rate is None else str(rate)


def type_out(view: TypeView) -> TypeOut:
    """A job type: its jobs per status and the limits claims obey now."""
    limits = view.limits
    return TypeOut.built(
        {
            "type": view.type,
            "counts": view.counts,
            "max_running": limits.max_running,
            "rate_limit": _text(limits.rate_limit),
            "paused": limits.paused,
            "max_run_seconds": limits.max_run_seconds,
            "partition_max_running": limits.partition_max_running,
            "partition_rate_limit": _text(limits.partition_rate_limit),
        }
    )


def types_out(views: Sequence[TypeView]) -> TypeList:
    """Every configured job type, in configuration order."""
    return TypeList.built({"types": [type_out(view) for view in views]})


def schedule_out(schedule: Schedule, now: datetime) -> ScheduleOut:
    """A schedule with its next fire times after ``now`` (none while disabled)."""
    return ScheduleOut.built(
        {
            "id": schedule.id,
            "name": schedule.name,
            "cron": schedule.cron,
            "description": cron.describe(schedule.cron),
            "timezone": schedule.timezone,
            "type": schedule.type,
            "payload": schedule.payload,
            "priority": schedule.priority_label,
            "enabled": schedule.enabled,
            "catch_up": schedule.catch_up,
            "next_runs": [iso(at) for at in schedules.next_runs(schedule, now)],
            "last_run_at": iso(schedule.last_run_at),
            "created_at": iso(schedule.created_at),
            "updated_at": iso(schedule.updated_at),
            "partition": schedule.partition,
        }
    )


def schedules_out(schedules: Sequence[Schedule], now: datetime) -> ScheduleList:
    """Every schedule, in the order given (by name)."""
    return ScheduleList.built({"schedules": [schedule_out(s, now) for s in schedules]})


def bulk_preview_out(preview: Preview) -> BulkPreview:
    """How many jobs a bulk operation would change, and the newest of them."""
    sample = [job_out(job) for job in preview.sample]
    return BulkPreview.built({"count": preview.count, "sample": sample})


def bulk_applied_out(operation: int, affected: int) -> BulkApplied:
    """An applied bulk operation: its audit event's id and how many jobs it changed."""
    return BulkApplied.built({"operation": operation, "affected": affected})
