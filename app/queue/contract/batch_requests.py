"""The request models of the batch routes and of release: many items, validated as one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo

from app.queue.contract.fields import (
    MAX_BATCH_MARK,
    Attempt,
    ErrorText,
    Flag,
    JobId,
    JsonObject,
    Message,
    Progress,
    RetryIn,
)
from app.queue.contract.request_model import RequestModel, refuse, says, settings_of
from app.queue.contract.requests import EnqueueBody
from app.queue.domain.models import Beat, Outcome

MAX_CHILDREN = 100  # jobs per POST /jobs/{id}/children


def _sized_list(items: Any, limit: int) -> Any:
    """Refuse an empty or oversized list before its items are validated one by one."""
    if isinstance(items, list) and not 1 <= len(items) <= limit:
        raise refuse(f"must hold from 1 to {limit} items")
    return items


def _batch_size(items: Any, info: ValidationInfo) -> Any:
    return _sized_list(items, settings_of(info).max_batch)


def _batch_of(description: str) -> Any:
    """Annotated metadata of a batch list: 1..MAX_BATCH items (the document says MAX_BATCH)."""
    return Field(json_schema_extra={"minItems": 1, MAX_BATCH_MARK: True}, description=description)


_SIZED = BeforeValidator(_batch_size)


class BatchBody(RequestModel):
    """``POST /jobs/batch``: jobs shaped like ``POST /jobs`` bodies, stored all or nothing."""

    jobs: Annotated[list[EnqueueBody], _SIZED, _batch_of("1..MAX_BATCH jobs, as for POST /jobs.")]


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

    def to_outcome(self) -> Outcome:
        """The service's outcome (whether its fields fit together is the service's rule)."""
        return Outcome(
            job_id=self.id,
            attempt=self.attempt,
            completed=self.outcome == "completed",
            result=self.result,
            error=self.error,
            retry_in=self.retry_in,
            retryable=self.retryable,
        )


class FinishBody(RequestModel):
    """``POST /jobs/finish``: many outcomes in one transaction, each answered on its own."""

    results: Annotated[list[FinishItem], _SIZED, _batch_of("1..MAX_BATCH outcomes.")]


class BeatItem(RequestModel):
    """One heartbeat of ``POST /jobs/heartbeat``."""

    id: JobId
    attempt: Attempt
    progress: Progress | None = None
    message: Message | None = None

    def to_beat(self) -> Beat:
        """The service's heartbeat."""
        return Beat(self.id, self.attempt, self.progress, self.message)


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
