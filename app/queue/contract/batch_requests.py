"""The request models of the batch routes and of release: many items, validated as one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, RootModel, ValidationInfo, model_validator

from app.queue.contract.fields import (
    MAX_BATCH_MARK,
    Attempt,
    ClaimTypes,
    ErrorText,
    Flag,
    JobId,
    JsonObject,
    LeaseSeconds,
    MaxJobs,
    Message,
    Progress,
    RetryIn,
    WaitSeconds,
)
from app.queue.contract.job_requests import EnqueueBody
from app.queue.contract.logs import CarriedLines
from app.queue.contract.request_model import RequestModel, refuse, says, settings_of
from app.queue.rules import secret_fields
from app.queue.rules.settings import QueueSettings
from app.queue.rules.workflows import GroupRequest
from app.queue.vocabulary.errors import InvalidInput, QueueError
from app.queue.vocabulary.job_fields import MAX_PARENTS
from app.queue.vocabulary.jobs import Beat, EnqueueRequest, Outcome, Wanted
from app.queue.vocabulary.trace import Trace

MAX_CHILDREN = 100  # jobs per POST /jobs/{id}/children


def _sized_list(items: Any, limit: int) -> Any:
    """Refuse an empty or oversized list before its items are validated one by one."""
    if isinstance(items, list) and not 1 <= len(items) <= limit:
        raise refuse(f"must hold from 1 to {limit} items")
    return items


def _batch_size(items: Any, info: ValidationInfo) -> Any:
    return _sized_list(items, settings_of(info).max_batch)


def _outcomes_size(items: Any, info: ValidationInfo) -> Any:
    """Outcomes of a finish: 1..MAX_BATCH, or none when the finish claims (checked with it)."""
    return items if items == [] else _batch_size(items, info)


def _batch_of(description: str) -> Any:
    """Annotated metadata of a batch list: 1..MAX_BATCH items (the document says MAX_BATCH)."""
    return Field(json_schema_extra={"minItems": 1, MAX_BATCH_MARK: True}, description=description)


_SIZED = BeforeValidator(_batch_size)


AfterItems = Annotated[
    list[Annotated[int, Field(ge=0)]],
    Field(max_length=MAX_PARENTS),
    says(f"must be a list of at most {MAX_PARENTS} indexes of earlier items"),
    Field(description="Earlier items of this batch (their indexes) that must finish first."),
]


class BatchItem(EnqueueBody):
    """One job of ``POST /jobs/batch``: a ``POST /jobs`` body that may also wait for earlier
    items of the same batch."""

    after_items: AfterItems | None = None

    def parents_problem(self, index: int) -> tuple[str, str] | None:
        """The field and the rule this item breaks as item ``index`` of its batch, if any: it
        may wait only for earlier items, and for at most MAX_PARENTS parents in all."""
        if any(earlier >= index for earlier in self.after_items or ()):
            return "after_items", "must name earlier items only"
        if len(self.depends_on or ()) + len(self.after_items or ()) > MAX_PARENTS:
            return "depends_on", f"at most {MAX_PARENTS} parents in all"
        return None


class Callback(EnqueueBody):
    """A group's callback job: a ``POST /jobs`` body enqueued once when the group finishes.
    It names no parents and no keys (it is enqueued once, by the group), and carries no
    secrets (it is stored with the group until then, where a secret has no place)."""

    @model_validator(mode="after")
    def _plain(self) -> Callback:
        for name in ("depends_on", "idempotency_key", "unique_key", "secrets"):
            if getattr(self, name) is not None:
                raise refuse("is not allowed in a callback", field=name)
        return self


class GroupSpec(RequestModel):
    """A batch's group: its name and the callbacks enqueued when every member has finished
    (``on_complete``) or every member completed (``on_success``)."""

    name: Annotated[str, Field(min_length=1, max_length=200), says("must be 1-200 characters")]
    on_complete: Callback | None = None
    on_success: Callback | None = None

    def to_request(self) -> GroupRequest:
        """The use cases' group."""
        return GroupRequest(
            self.name,
            None if self.on_complete is None else self.on_complete.to_request(),
            None if self.on_success is None else self.on_success.to_request(),
        )


class BatchBody(RequestModel):
    """``POST /jobs/batch``: jobs shaped like ``POST /jobs`` bodies, stored all or nothing,
    optionally forming a group."""

    jobs: Annotated[list[BatchItem], _SIZED, _batch_of("1..MAX_BATCH jobs, as for POST /jobs.")]
    atomic: Annotated[
        Literal[True],
        says("must be true or false"),
        Field(description="true (the default): all or nothing."),
    ] = True
    group: GroupSpec | None = None

    @model_validator(mode="after")
    def _earlier_items(self) -> BatchBody:
        for index, item in enumerate(self.jobs):
            if problem := item.parents_problem(index):
                name, message = problem
                raise refuse(message, field=f"jobs[{index}].{name}")
        return self


class PerItemBatchBody(RequestModel):
    """``POST /jobs/batch`` with ``"atomic": false``: each job admitted on its own, as ``POST
    /jobs`` would admit it, a refused one (a malformed item too) undoing nothing; no group."""

    jobs: Annotated[
        list[Annotated[dict[str, Any], says("must be a JSON object")]],
        _SIZED,
        _batch_of("1..MAX_BATCH objects, each a POST /jobs body, validated on its own."),
    ]
    atomic: Annotated[Literal[False], Field(description="false: each item on its own.")]
    group: Annotated[None, says('requires "atomic": true')] = None

    def to_requests(
        self, settings: QueueSettings, box: secret_fields.Sealer | None, trace: Trace | None
    ) -> list[EnqueueRequest | QueueError]:
        """Each item as the use cases' enqueue request, or why it is refused (its fields keyed
        as ``POST /jobs`` keys them), its secrets sealed with ``box``."""
        return [
            self._request(index, item, settings, box, trace) for index, item in enumerate(self.jobs)
        ]

    @staticmethod
    def _request(
        index: int,
        item: Mapping[str, Any],
        settings: QueueSettings,
        box: secret_fields.Sealer | None,
        trace: Trace | None,
    ) -> EnqueueRequest | QueueError:
        try:
            parsed = BatchItem.parse(item, settings, secrets_box=box)
        except InvalidInput as exc:
            return exc
        if problem := parsed.parents_problem(index):
            name, message = problem
            return InvalidInput({name: message})
        return parsed.to_request(box, trace=trace)


class BatchRequest(RootModel[BatchBody | PerItemBatchBody]):
    """``POST /jobs/batch``: all or nothing (the default), or each item on its own (``"atomic":
    false``)."""

    @staticmethod
    def parse(
        data: Mapping[str, Any], settings: QueueSettings, **context: Any
    ) -> BatchBody | PerItemBatchBody:
        """The body as the model its ``atomic`` names (``RequestModel.parse``)."""
        if data.get("atomic") is False:
            return PerItemBatchBody.parse(data, settings, **context)
        return BatchBody.parse(data, settings, **context)


Verdict = Annotated[Literal["completed", "failed"], says("must be one of completed, failed")]


class FinishItem(RequestModel):
    """One outcome of ``POST /jobs/finish``: what the single complete or fail route takes."""

    id: JobId
    attempt: Attempt
    outcome: Verdict
    result: JsonObject | None = None
    error: ErrorText | None = None
    retry_in: RetryIn | None = None
    retryable: Flag | None = None
    logs: CarriedLines | None = None

    def to_outcome(self) -> Outcome:
        """The use cases' outcome (whether its fields fit together is their rule)."""
        return Outcome(
            job_id=self.id,
            attempt=self.attempt,
            completed=self.outcome == "completed",
            result=self.result,
            error=self.error,
            retry_in=self.retry_in,
            retryable=self.retryable,
            logs=tuple(self.logs or ()),
        )


class ClaimPart(RequestModel):
    """The claim of a ``POST /jobs/finish``: what ``POST /jobs/claim`` takes with ``max_jobs``."""

    max_jobs: MaxJobs
    types: ClaimTypes | None = None
    lease_seconds: LeaseSeconds | None = None
    wait_seconds: WaitSeconds = 0.0

    def to_wanted(self) -> Wanted:
        """The use cases' claim."""
        types = tuple(self.types) if self.types else None
        return Wanted(self.max_jobs, types, self.lease_seconds, self.wait_seconds)


class FinishBody(RequestModel):
    """``POST /jobs/finish``: many outcomes in one transaction, each answered on its own, and
    optionally a claim of the next jobs once they are committed (then ``results`` may be
    empty)."""

    results: Annotated[
        list[FinishItem],
        BeforeValidator(_outcomes_size),
        Field(
            json_schema_extra={MAX_BATCH_MARK: True},
            description="0..MAX_BATCH outcomes (at least one without a claim).",
        ),
    ]
    claim: ClaimPart | None = None

    @model_validator(mode="after")
    def _something(self) -> FinishBody:
        if not self.results and self.claim is None:
            raise refuse("must hold from 1 outcome when nothing is claimed", field="results")
        return self


class BeatItem(RequestModel):
    """One heartbeat of ``POST /jobs/heartbeat``."""

    id: JobId
    attempt: Attempt
    progress: Progress | None = None
    message: Message | None = None
    logs: CarriedLines | None = None

    def to_beat(self) -> Beat:
        """The use cases' heartbeat."""
        return Beat(self.id, self.attempt, self.progress, self.message, tuple(self.logs or ()))


class HeartbeatsBody(RequestModel):
    """``POST /jobs/heartbeat``: many heartbeats in one transaction, each answered on its own."""

    jobs: Annotated[list[BeatItem], _SIZED, _batch_of("1..MAX_BATCH heartbeats.")]


class ReleaseBody(RequestModel):
    """``POST /jobs/{id}/release``: the attempt the worker hands back."""

    attempt: Attempt


class ChildrenBody(RequestModel):
    """``POST /jobs/{id}/children``: the attempt the worker holds, and the jobs to enqueue as
    the job's children, shaped like ``POST /jobs`` bodies."""

    attempt: Attempt
    jobs: Annotated[
        list[EnqueueBody],
        BeforeValidator(lambda items: _sized_list(items, MAX_CHILDREN)),
        Field(
            json_schema_extra={"minItems": 1, "maxItems": MAX_CHILDREN},
            description=f"1..{MAX_CHILDREN} jobs, as for POST /jobs.",
        ),
    ]
