"""The response bodies of the job routes, as models: the API document is generated from them
and tests check that every answer the app gives fits them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from app.queue.contract.fields import PriorityLabel, StatusLabel

Instant = Annotated[
    str,
    Field(
        json_schema_extra={"format": "date-time"},
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$",
        description="ISO 8601 UTC with microseconds and a Z, e.g. 2026-01-31T12:00:00.000000Z",
    ),
]
ADMINS_ONLY = "The last sanitized error. Present only in responses to admins."


class ResponseModel(BaseModel):
    """An answer body: exactly these keys (``error`` is left out for non-admins)."""

    model_config = ConfigDict(strict=True, extra="forbid")


class TraceOut(ResponseModel):
    """The trace headers an enqueue carried, for the worker to continue the trace."""

    traceparent: Annotated[str, Field(pattern=r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")]
    tracestate: str | None


class JobOut(ResponseModel):
    """A job. Every key is always present except ``error``, which only admins see."""

    model_config = ConfigDict(title="Job")

    id: Annotated[int, Field(ge=1)]
    type: str
    payload: dict[str, Any]
    priority: PriorityLabel
    status: StatusLabel
    retry_count: Annotated[int, Field(ge=0)]
    max_retries: Annotated[int, Field(ge=0, le=25)]
    attempt: Annotated[int, Field(ge=0, description="Pass it back to complete/fail/heartbeat.")]
    idempotency_key: str | None
    run_at: Instant
    claimed_at: Instant | None
    lease_expires_at: Instant | None
    worker_id: str | None
    progress: Annotated[int, Field(ge=0, le=100)] | None
    progress_message: Annotated[
        str | None,
        Field(description="The latest heartbeat's `message` (sanitized); null when none."),
    ]
    result: dict[str, Any] | None
    created_at: Instant
    updated_at: Instant
    finished_at: Instant | None
    parent_id: Annotated[
        int | None,
        Field(ge=1, description="The job whose worker spawned this one; null otherwise."),
    ]
    trace: Annotated[
        TraceOut | None,
        Field(description="The W3C trace context of the enqueue request; null when none."),
    ]
    error: Annotated[str | None, Field(description=ADMINS_ONLY)] = None
    duplicate: Annotated[
        Literal[True] | None,
        Field(
            description="Present only in an enqueue's answer: this is the caller's active job "
            "of the same type and unique_key, and nothing was added."
        ),
    ] = None


class JobPage(ResponseModel):
    """One page of jobs, newest first."""

    jobs: list[JobOut]
    next_cursor: Annotated[
        str | None,
        Field(description="Pass as `cursor` for the next (older) page; null at the end."),
    ]


class CreatedJobs(ResponseModel):
    """The jobs of a batch enqueue in request order, and whether each was created (false: an
    idempotent replay answered with the existing job)."""

    jobs: list[JobOut]
    created: list[bool]


class ClaimedJobs(ResponseModel):
    """The jobs of a claim with ``max_jobs``, in claim order, each with its own attempt."""

    jobs: Annotated[list[JobOut], Field(min_length=1)]


class Claimed(RootModel[JobOut | ClaimedJobs]):
    """A claim's answer: the job (without ``max_jobs``), or ``{"jobs": [...]}`` (with it)."""


ItemStatus = Annotated[int, Field(ge=200, le=499, description="What the single-job route says.")]
ItemDetail = Annotated[str, Field(min_length=1, description="Why the item was refused.")]


class FinishAnswer(ResponseModel):
    """One outcome's answer: the job it left (200), or why it was refused (404, 409, 422)."""

    id: int
    status: ItemStatus
    job: JobOut | None = None
    detail: ItemDetail | None = None


class FinishAnswers(ResponseModel):
    """Each outcome's answer, in request order."""

    results: list[FinishAnswer]


class BeatAnswer(ResponseModel):
    """One heartbeat's answer: the extended lease (200), or why it was refused (404, 409)."""

    id: int
    status: ItemStatus
    lease_expires_at: Instant | None = None
    detail: ItemDetail | None = None


class BeatAnswers(ResponseModel):
    """Each heartbeat's answer, in request order."""

    results: list[BeatAnswer]


class EventOut(ResponseModel):
    """A transition of a job."""

    model_config = ConfigDict(title="Event")

    id: Annotated[int, Field(ge=1)]
    at: Instant
    kind: str
    from_status: StatusLabel | None
    to_status: StatusLabel
    actor: str | None
    attempt: Annotated[int, Field(ge=0)] | None
    note: str | None
    error: Annotated[str | None, Field(description=ADMINS_ONLY)] = None


class EventList(ResponseModel):
    """A job's events, oldest first."""

    events: list[EventOut]


class Problem(ResponseModel):
    """RFC 9457 problem details; ``errors`` maps each refused field to what is wrong (422)."""

    type: Annotated[str, Field(min_length=1)]
    title: Annotated[str, Field(min_length=1)]
    status: Annotated[int, Field(ge=400, le=599)]
    detail: Annotated[str, Field(min_length=1)]
    errors: dict[str, Annotated[str, Field(min_length=1)]] | None = None


class ValidationProblem(Problem):
    """A 422 problem: ``errors`` names each refused field (``jobs[3].type`` inside lists;
    unknown fields say ``unknown field``)."""

    errors: Annotated[dict[str, Annotated[str, Field(min_length=1)]], Field(min_length=1)]
