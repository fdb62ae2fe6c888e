"""The response bodies of the job routes, as models: the API document is generated from them, the
answers are written by them (``response_builders`` builds them, ``app.api.respond`` sends them), and
tests check that every answer the app gives fits them."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Self, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, RootModel

from app.queue.contract.fields import PriorityLabel, StatusLabel
from app.queue.vocabulary.job_fields import MAX_RETRIES

Instant = Annotated[
    str,
    Field(
        json_schema_extra={"format": "date-time"},
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$",
        description="ISO 8601 UTC with microseconds and a Z, e.g. 2026-01-31T12:00:00.000000Z",
    ),
]
ADMINS_ONLY = "The last sanitized error. Present only in responses to admins."


class AdminsOnly:
    """Marks a field of an answer that only admins see (error texts may hold what sanitizing
    missed); ``hidden_from_others`` finds every such field, and ``app.api.respond``, which
    writes every answer, leaves them out of the answers to anyone else."""


AdminsError = Annotated[str | None, AdminsOnly(), Field(description=ADMINS_ONLY)]


@cache
def hidden_from_others(model: type[BaseModel]) -> dict[str, Any] | None:
    """Where answers of ``model`` hold fields that only admins see, as pydantic's ``exclude``
    takes them (in every item of a list: ``__all__``); None when they hold none."""
    hidden: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if any(isinstance(mark, AdminsOnly) for mark in field.metadata):
            hidden[name] = True
        elif (inner := _hidden_inside(field.annotation)) is not None:
            hidden[name] = inner
    return hidden or None


def _hidden_inside(annotation: Any) -> dict[str, Any] | None:
    """What only admins see of a field that holds answers (one, a list, or an optional one)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return hidden_from_others(annotation)
    hidden: dict[str, Any] = {}
    for argument in get_args(annotation):
        hidden |= _hidden_inside(argument) or {}
    if not hidden:
        return None
    return {"__all__": hidden} if get_origin(annotation) is list else hidden


class ResponseModel(BaseModel):
    """An answer body: exactly these keys (``AdminsOnly`` ones are left out for non-admins). A
    field with a default is sent only when it was given (``exclude_unset``): the default means
    "absent"."""

    model_config = ConfigDict(strict=True, extra="forbid")

    # The fields an answer may leave out, with their defaults ("absent"), in field order.
    _optional: ClassVar[tuple[tuple[str, Any], ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._optional = tuple(
            (name, field.get_default(call_default_factory=True))
            for name, field in cls.model_fields.items()
            if not field.is_required()
        )

    @classmethod
    def built(cls, values: dict[str, Any]) -> Self:
        """The answer holding ``values`` (taken over, not copied), sent in their order: what
        ``model_construct`` makes of values given in field order, without its loop over every
        field, which cost more than writing the answer. Unchecked: the values come from our
        own rows, and the tests check that answers fit their models, in field order."""
        answer = cls.__new__(cls)
        _set(answer, "__pydantic_fields_set__", set(values))
        for name, default in cls._optional:  # after the given ones: their order is kept
            if name not in values:
                values[name] = default
        _set(answer, "__dict__", values)
        _set(answer, "__pydantic_extra__", None)
        _set(answer, "__pydantic_private__", None)
        return answer


_set = object.__setattr__  # as model_construct sets them: a model's own refuses non-fields


class TraceOut(ResponseModel):
    """The trace headers an enqueue carried, for the worker to continue the trace."""

    traceparent: Annotated[str, Field(pattern=r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")]
    tracestate: str | None


class ParentOut(ResponseModel):
    """A parent of a claimed job: what it was, how it ended, what it returned."""

    id: Annotated[int, Field(ge=1)]
    type: str
    status: StatusLabel
    result: dict[str, Any] | None


class JobOut(ResponseModel):
    """A job. Every key is always present except ``error``, which only admins see."""

    model_config = ConfigDict(title="Job")

    id: Annotated[int, Field(ge=1)]
    type: str
    payload: dict[str, Any]
    priority: PriorityLabel
    status: StatusLabel
    retry_count: Annotated[int, Field(ge=0)]
    max_retries: Annotated[int, Field(ge=MAX_RETRIES.low, le=MAX_RETRIES.high)]
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
    secret_names: Annotated[
        list[str],
        Field(
            max_length=16,
            description="The names of the job's secrets (their values: `secrets`, in the "
            "claim's answer only). Names stay after the values are erased.",
        ),
    ]
    deadline_at: Annotated[
        Instant | None,
        Field(
            description="While running: when the attempt must have finished (the type's "
            "max_run_seconds from the claim); past it the server fails the attempt. Else null."
        ),
    ]
    depends_on: Annotated[list[int], Field(description="The parents named at enqueue.")]
    waiting_for: Annotated[
        list[int],
        Field(description="The parents not finished yet: a job waits, pending, while any is."),
    ]
    group_id: Annotated[
        int | None, Field(description="The group the job is a member (or the callback) of.")
    ]
    parent_id: Annotated[
        int | None,
        Field(ge=1, description="The job whose worker spawned this one; null otherwise."),
    ]
    trace: Annotated[
        TraceOut | None,
        Field(description="The W3C trace context of the enqueue request; null when none."),
    ]
    partition: Annotated[
        str | None,
        Field(description="The partition the job is claimed fairly in; null: the partition null."),
    ]
    error: AdminsError = None
    secrets: Annotated[
        dict[str, str] | None,
        Field(
            description="Present only in a claim's answer, to the worker that now holds the "
            "job, when it has secrets: their values by name ({} once erased: an admin retried "
            "the job after it finished)."
        ),
    ] = None
    parents: Annotated[
        list[ParentOut] | None,
        Field(
            description="Present only in a claim's answer (and a finish's `jobs`), for a job "
            "with `depends_on`: each parent's id, type, status and result, in `depends_on` "
            "order (a parent deleted since is left out)."
        ),
    ] = None
    duplicate: Annotated[
        Literal[True] | None,
        Field(
            description="Present only in an enqueue's answer: this is the caller's active job "
            "of the same type and unique_key, and nothing was added."
        ),
    ] = None


class JobList(ResponseModel):
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
    group_id: Annotated[
        int | None,
        Field(description="The group the batch formed (with `group`; else absent)."),
    ] = None


class GroupCallbacks(ResponseModel):
    """The ids of a group's callback jobs, null until enqueued."""

    on_complete: int | None
    on_success: int | None


class RefusedCallbacks(ResponseModel):
    """Why a group's callback was not enqueued when the group finished: its producer could no
    longer enqueue it then (disabled, or its priority above the producer's cap). A callback
    that was not refused is absent."""

    on_complete: str | None = None
    on_success: str | None = None


class GroupOut(ResponseModel):
    """A group of jobs: its members per status and its callbacks."""

    model_config = ConfigDict(title="Group")

    id: Annotated[int, Field(ge=1)]
    name: str
    total: Annotated[int, Field(ge=0, description="Members (callbacks are not members).")]
    counts: dict[StatusLabel, Annotated[int, Field(ge=0)]]
    finished: Annotated[bool, Field(description="Every member has finished.")]
    callbacks: GroupCallbacks
    callbacks_refused: RefusedCallbacks


class ClaimedJobs(ResponseModel):
    """The jobs of a claim with ``max_jobs``, in claim order, each with its own attempt."""

    jobs: Annotated[list[JobOut], Field(min_length=1)]


class Claimed(RootModel[JobOut | ClaimedJobs]):
    """A claim's answer: the job (without ``max_jobs``), or ``{"jobs": [...]}`` (with it)."""


ItemStatus = Annotated[int, Field(ge=200, le=499, description="What the single-job route says.")]
ItemDetail = Annotated[str, Field(min_length=1, description="Why the item was refused.")]


class FinishResult(ResponseModel):
    """One outcome's answer: the job it left (200), or why it was refused (404, 409, 422)."""

    id: int
    status: ItemStatus
    job: JobOut | None = None
    detail: ItemDetail | None = None


class FinishResults(ResponseModel):
    """Each outcome's answer, in request order; with a claim, the jobs claimed (each as in a
    claim's answer; empty when none was due by the end of the wait)."""

    results: list[FinishResult]
    jobs: list[JobOut] | None = Field(default=None, description="Only when the body claims.")


class EnqueueResult(ResponseModel):
    """One item of a batch enqueued with ``"atomic": false``: the status ``POST /jobs`` would
    give it alone (201 new, 200 an idempotent replay or, with ``"duplicate": true``, the active
    job of its unique key; 403, 409, 422), with the job, or why it was refused (for a 422,
    ``errors`` keyed as ``POST /jobs`` keys them)."""

    status: ItemStatus
    job: JobOut | None = None
    detail: ItemDetail | None = None
    errors: dict[str, Annotated[str, Field(min_length=1)]] | None = None


class EnqueueResults(ResponseModel):
    """Each item's answer of a batch enqueued with ``"atomic": false``, in request order."""

    results: list[EnqueueResult]


class BatchAnswer(RootModel[CreatedJobs | EnqueueResults]):
    """A batch enqueue's 200: all or nothing, the existing jobs when every item was an
    idempotent replay; with ``"atomic": false``, each item's answer."""


class BeatResult(ResponseModel):
    """One heartbeat's answer: the extended lease (200), or why it was refused (404, 409)."""

    id: int
    status: ItemStatus
    lease_expires_at: Instant | None = None
    detail: ItemDetail | None = None


class BeatResults(ResponseModel):
    """Each heartbeat's answer, in request order."""

    results: list[BeatResult]


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
    error: AdminsError = None


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
