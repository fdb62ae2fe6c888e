"""The response bodies of the job routes, as models: the API document is generated from them
and tests check that every answer the app gives fits them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.queue.fields import PriorityLabel, StatusLabel

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
    result: dict[str, Any] | None
    created_at: Instant
    updated_at: Instant
    finished_at: Instant | None
    error: Annotated[str | None, Field(description=ADMINS_ONLY)] = None


class JobPage(ResponseModel):
    """One page of jobs, newest first."""

    jobs: list[JobOut]
    next_cursor: Annotated[
        str | None,
        Field(description="Pass as `cursor` for the next (older) page; null at the end."),
    ]


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
