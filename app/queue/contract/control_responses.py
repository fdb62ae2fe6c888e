"""The response bodies of the routes that control when jobs run (job types, schedules) and
explain why a job waits, as models: the API document is generated from them and tests check
that the app's answers fit them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from app.queue.contract.fields import PriorityLabel, StatusLabel
from app.queue.contract.job_responses import Instant, ResponseModel

Count = Annotated[int, Field(ge=0)]
RateText = Annotated[str, Field(pattern=r"^[0-9]+/(second|minute|hour)$")]


class TypeOut(ResponseModel):
    """A job type: jobs per status and the limits claims obey now (the configuration merged
    with admins' overrides; null: no limit)."""

    type: str
    counts: dict[StatusLabel, Count]
    max_running: Annotated[int, Field(ge=1)] | None
    rate_limit: RateText | None
    paused: bool
    max_run_seconds: Annotated[int, Field(ge=1)] | None
    partition_max_running: Annotated[int, Field(ge=1)] | None
    partition_rate_limit: RateText | None


class TypeList(ResponseModel):
    """Every configured job type, in configuration order."""

    types: list[TypeOut]


class ScheduleOut(ResponseModel):
    """A schedule, with its next fire times (none while disabled)."""

    id: Annotated[int, Field(ge=1)]
    name: str
    cron: str
    description: Annotated[str, Field(description="The cron expression in words.")]
    timezone: str
    type: str
    payload: dict[str, Any]
    priority: PriorityLabel
    enabled: bool
    catch_up: Annotated[str, Field(pattern="^(skip|one)$")]
    next_runs: Annotated[list[Instant], Field(max_length=5)]
    last_run_at: Instant | None
    created_at: Instant
    updated_at: Instant
    partition: Annotated[
        str | None, Field(description="The partition of the jobs it enqueues; null: none.")
    ]


class ScheduleList(ResponseModel):
    """Every schedule, by name."""

    schedules: list[ScheduleOut]


class ReasonOut(ResponseModel):
    """One reason: a code for programs, a sentence for people, the figures behind it."""

    code: str
    detail: Annotated[str, Field(min_length=1)]
    figures: dict[str, Any]


class ExplanationOut(ResponseModel):
    """Why a job is where it is (see the README's table of reason codes)."""

    status: StatusLabel
    reasons: list[ReasonOut]
