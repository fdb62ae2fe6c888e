"""Field types shared by request models: each carries its rule, its message and its schema (a
per-job field's limits and default come from ``app.queue.vocabulary.job_fields``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
)

from app.queue.contract.cursors import MAX_DB_INT, decode_cursor
from app.queue.contract.request_model import refuse, says, settings_of
from app.queue.contract.strictjson import (
    compact_size,
    json_value_problem,
    mend_surrogates,
    text_problem,
)
from app.queue.rules.settings import QueueSettings
from app.queue.vocabulary.job_fields import (
    IDEMPOTENCY_KEY,
    MAX_DELAY_SECONDS,
    MAX_PARENTS,
    MAX_RETRIES,
    MAX_SECRETS,
    MAX_SECRETS_BYTES,
    PARTITION,
    SECRET_NAME_PATTERN,
    TIMESTAMP_LENGTH,
    UNIQUE_KEY,
)
from app.queue.vocabulary.jobs import Keyset
from app.queue.vocabulary.orders import SortKey

MAX_MESSAGE_LENGTH = 500
# Marks that the API document replaces with configured values (job types, the lease ceiling).
JOB_TYPES_MARK = "x-job-types"
MAX_LEASE_MARK = "x-max-lease"
MAX_BATCH_MARK = "x-max-batch"
MAX_LIST_LIMIT = 1000

PriorityLabel = Literal["low", "medium", "high", "critical"]


def _stored_text(value: str) -> str:
    if problem := text_problem(value):
        raise refuse(problem)
    return value


def _allowed_type(value: str, info: ValidationInfo) -> str:
    if value not in settings_of(info).job_types:
        raise refuse("is not an allowed job type")
    return value


def json_object_problem(value: dict[str, Any], settings: QueueSettings) -> str | None:
    """Why a JSON object cannot be stored as a payload or result (depth, text, size), or None."""
    if problem := json_value_problem(value, settings.max_json_depth):
        return problem
    size = compact_size(value)
    if size > settings.max_payload_bytes:
        return f"is {size} bytes; the limit is {settings.max_payload_bytes}"
    return None


def _json_object(value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    if problem := json_object_problem(value, settings_of(info)):
        raise refuse(problem)
    return value


def parse_timestamp(value: Any) -> datetime:
    """An aware UTC datetime from an ISO 8601 string with an offset; the rule's message if not."""
    if not isinstance(value, str) or len(value) > TIMESTAMP_LENGTH:
        raise refuse("must be an ISO 8601 timestamp string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise refuse("must be an ISO 8601 timestamp, e.g. 2026-01-31T12:00:00Z") from None
    if parsed.tzinfo is None:
        raise refuse("must include a UTC offset, e.g. Z or +02:00")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise refuse("is out of range") from None


_OBJECT_RULE = (
    "A JSON object of at most MAX_PAYLOAD_BYTES bytes as compact UTF-8 JSON, nested at most "
    "MAX_JSON_DEPTH levels, with no NUL characters or lone surrogates in keys or strings."
)

JobType = Annotated[
    str,
    AfterValidator(_allowed_type),
    says("is required and must be a string"),
    WithJsonSchema({"type": "string", JOB_TYPES_MARK: True}),
    Field(description="A configured job type (JOB_TYPES)."),
]
JsonObject = Annotated[
    dict[str, Any],
    AfterValidator(_json_object),
    says("must be a JSON object"),
    Field(description=_OBJECT_RULE),
]
Priority = Annotated[
    PriorityLabel,
    says("must be one of low, medium, high, critical"),
    Field(description="Above the caller's priority cap is 403 (admins: any)."),
]
MaxRetries = Annotated[int, Field(ge=MAX_RETRIES.low, le=MAX_RETRIES.high), says(MAX_RETRIES.rule)]
IdempotencyKey = Annotated[
    str,
    Field(pattern=IDEMPOTENCY_KEY.pattern, min_length=1, max_length=IDEMPOTENCY_KEY.length),
    says(IDEMPOTENCY_KEY.rule),
]
UniqueKey = Annotated[
    str,
    Field(pattern=UNIQUE_KEY.pattern),
    says(UNIQUE_KEY.rule),
    Field(
        description="While a job of yours with this type and key is pending or running (and, "
        'with unique_for, younger than that), enqueue answers 200 with it and "duplicate": true '
        "instead of adding one. Printable ASCII without spaces."
    ),
]
Partition = Annotated[
    str,
    Field(pattern=PARTITION.pattern),
    says(PARTITION.rule),
    Field(
        description="The partition the job is claimed fairly in (a tenant, a customer): among "
        "due jobs of one priority, claims serve partitions in turn. Absent: the partition null."
    ),
]
UniqueFor = Annotated[
    float,
    Field(gt=0, le=MAX_DELAY_SECONDS, allow_inf_nan=False),
    says(f"must be a number of seconds above 0 and at most {MAX_DELAY_SECONDS}"),
    Field(description="Seconds: only a job enqueued this recently counts. Needs unique_key."),
]
Timestamp = Annotated[
    datetime,
    PlainValidator(parse_timestamp),
    WithJsonSchema({"type": "string", "format": "date-time", "maxLength": TIMESTAMP_LENGTH}),
    Field(description="ISO 8601 with a UTC offset (Z or +HH:MM)."),
]
Delay = Annotated[
    float,
    Field(ge=0, le=MAX_DELAY_SECONDS, allow_inf_nan=False),
    says(f"must be a number from 0 to {MAX_DELAY_SECONDS}"),
]
RetryIn = Annotated[
    float,
    Field(ge=0, le=MAX_DELAY_SECONDS, allow_inf_nan=False),
    says(f"must be a number of seconds from 0 to {MAX_DELAY_SECONDS}"),
    Field(description="Seconds until the retry instead of the backoff."),
]
MAX_WAIT_SECONDS = 30  # a long-polling claim waits at most this long (docs/api.md, "Routes")
WaitSeconds = Annotated[
    float,
    Field(ge=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False),
    says(f"must be a number from 0 to {MAX_WAIT_SECONDS}"),
    Field(description="Long-poll: wait up to this many seconds for a job to become due."),
]
Attempt = Annotated[
    int,
    Field(ge=1, le=MAX_DB_INT),
    says("must be a positive integer"),
    Field(description="The attempt the caller holds (the job's `attempt`); a stale one is 409."),
]
Progress = Annotated[int, Field(ge=0, le=100), says("must be an integer from 0 to 100")]
Message = Annotated[
    str,
    # Progress reports name files as errors do: lone surrogates are mended, not refused.
    BeforeValidator(mend_surrogates),
    Field(max_length=MAX_MESSAGE_LENGTH, json_schema_extra={"pattern": "^[^\\u0000]*$"}),
    AfterValidator(_stored_text),
    says(f"must be a string of at most {MAX_MESSAGE_LENGTH} characters"),
]
ErrorText = Annotated[
    str,
    # An error is what an exception said, lone surrogates included (a file name that is not
    # UTF-8): mended, not refused, so the outcomes sent with it are not refused with it.
    BeforeValidator(mend_surrogates),
    Field(min_length=1, pattern="\\S"),
    says("is required and must be a non-empty string"),
    Field(description="What went wrong; sanitized of credentials and capped before it is stored."),
]
Flag = Annotated[bool, says("must be true or false")]


def _lease(value: int, info: ValidationInfo) -> int:
    if not 1 <= value <= settings_of(info).max_lease_seconds:
        raise refuse(f"must be an integer from 1 to {settings_of(info).max_lease_seconds}")
    return value


def _query_integer(value: Any, low: int, high: int) -> int:
    """A query string's whole number in ``low..high``, in ASCII digits only."""
    if (
        not isinstance(value, str)
        or not value.isascii()
        or not value.isdigit()
        or not low <= int(value) <= high
    ):
        raise refuse(f"must be an integer from {low} to {high}")
    return int(value)


def _limit(value: Any) -> int:
    return _query_integer(value, 1, MAX_LIST_LIMIT)


def _wait(value: Any) -> int:
    return _query_integer(value, 0, MAX_WAIT_SECONDS)


def _cursor(value: Any) -> tuple[SortKey, Keyset]:
    try:
        return decode_cursor(value if isinstance(value, str) else "")
    except ValueError as exc:
        raise refuse(str(exc)) from None


LeaseSeconds = Annotated[
    int,
    AfterValidator(_lease),
    says("must be an integer from 1 to MAX_LEASE_SECONDS"),
    WithJsonSchema({"type": "integer", "minimum": 1, MAX_LEASE_MARK: True}),
    Field(description="1..MAX_LEASE_SECONDS; default: the job type's lease."),
]
StatusLabel = Annotated[
    Literal["pending", "running", "completed", "failed", "cancelled"],
    says("must be one of pending, running, completed, failed, cancelled"),
]
ListType = Annotated[
    str,
    Field(max_length=200, pattern="^[^\\u0000]*$"),
    AfterValidator(_stored_text),
    says("is not a valid job type"),
    Field(description="Exact job type."),
]
Limit = Annotated[
    int,
    PlainValidator(_limit),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT, "default": 50}),
    Field(description="Page size, ASCII digits only."),
]
WaitQuery = Annotated[
    int,
    PlainValidator(_wait),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS, "default": 0}),
    Field(description="Wait up to this many seconds for the job to finish (ASCII digits)."),
]
Cursor = Annotated[
    tuple[SortKey, Keyset],
    PlainValidator(_cursor),
    WithJsonSchema(
        {
            "type": "string",
            "description": "Opaque: a next_cursor from an earlier page. Anything else is 422.",
        }
    ),
]
Search = Annotated[
    str,
    Field(max_length=IDEMPOTENCY_KEY.length, pattern="^[^\\u0000]*$"),
    AfterValidator(_stored_text),
    says("must be a job id or an idempotency key"),
    Field(description="A job id or an exact idempotency key (surrounding spaces are ignored)."),
]


MAX_CLAIM_JOBS = 100  # most jobs one claim hands out (docs/api.md, "Routes")
MaxJobs = Annotated[
    int,
    Field(ge=1, le=MAX_CLAIM_JOBS),
    says(f"must be an integer from 1 to {MAX_CLAIM_JOBS}"),
    Field(description='Claim up to this many jobs; the answer is then `{"jobs": [...]}`.'),
]
ClaimTypes = Annotated[
    list[JobType],
    Field(min_length=1, max_length=MAX_LIST_LIMIT),
    Field(description="Hand out only jobs of these configured types."),
]
JobId = Annotated[int, Field(ge=1, le=MAX_DB_INT), says("must be a positive integer")]


_SECRET_NAME = re.compile(SECRET_NAME_PATTERN)
NO_SECRETS_KEY = (
    "this server has no SECRETS_KEY, so it cannot store secrets: an operator must set "
    "FLASK_SECRETS_KEY (or send the job without secrets)"
)


def _secrets(value: Any, info: ValidationInfo) -> dict[str, str]:
    """Names like identifiers, string values storable as text, within the count and size
    limits; and a server that can seal them (``secrets_box`` in the validation context)."""
    if not isinstance(value, dict):
        raise refuse("must be an object of names to strings")
    if len(value) > MAX_SECRETS:
        raise refuse(f"holds {len(value)} names; the limit is {MAX_SECRETS}")
    for name, text in value.items():
        if not _SECRET_NAME.match(name):
            raise refuse(
                "names must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or '_'"
            )
        if not isinstance(text, str) or text_problem(text):
            raise refuse(f"the value of {name} must be a string (no NUL, no lone surrogates)")
    size = compact_size(value)
    if size > MAX_SECRETS_BYTES:
        raise refuse(f"is {size} bytes; the limit is {MAX_SECRETS_BYTES}")
    if (info.context or {}).get("secrets_box") is None:
        raise refuse(NO_SECRETS_KEY)
    return value


Secrets = Annotated[
    dict[str, str],
    PlainValidator(_secrets),
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": MAX_SECRETS,
            "propertyNames": {"pattern": SECRET_NAME_PATTERN},
            "additionalProperties": {"type": "string", "pattern": "^[^\\u0000]*$"},
            "description": f"Secret values by name (at most {MAX_SECRETS} names, "
            f"{MAX_SECRETS_BYTES} bytes in all), stored encrypted under SECRETS_KEY and handed "
            "out only in the claim's answer to the worker that holds the job; every other "
            "answer shows `secret_names`. Erased when the job finishes for good. 422 when the "
            "server has no SECRETS_KEY.",
        }
    ),
]

Parents = Annotated[
    list[JobId],
    Field(max_length=MAX_PARENTS),
    says(f"must be a list of at most {MAX_PARENTS} job ids"),
    Field(
        description=f"Jobs that must finish first (at most {MAX_PARENTS}): jobs the caller can "
        "see that existed before this request (a child: its parent and the parent's other "
        "children)."
    ),
]
DependencyFailure = Annotated[
    Literal["cancel", "run"],
    says("must be one of cancel, run"),
    Field(
        description='When a parent fails or is cancelled: "cancel" this job (default) or '
        '"run" it once every parent has finished.'
    ),
]
