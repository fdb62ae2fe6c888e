"""The request models of the job routes: what each body or query may hold, validated as one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from app.queue.contract.bulk import Reason
from app.queue.contract.fields import (
    Attempt,
    ClaimTypes,
    Cursor,
    Delay,
    DependencyFailure,
    ErrorText,
    Flag,
    IdempotencyKey,
    JobType,
    JsonObject,
    LeaseSeconds,
    Limit,
    ListType,
    MaxJobs,
    MaxRetries,
    Message,
    Parents,
    Partition,
    Priority,
    Progress,
    RetryIn,
    Search,
    Secrets,
    StatusLabel,
    Timestamp,
    UniqueFor,
    UniqueKey,
    WaitQuery,
    WaitSeconds,
)
from app.queue.contract.payload_search import PayloadQuery
from app.queue.contract.request_model import RequestModel, parse_query, refuse
from app.queue.contract.schedules import without_null
from app.queue.rules import secret_fields
from app.queue.rules.settings import QueueSettings
from app.queue.vocabulary.job_fields import (
    DEFAULT_ON_DEPENDENCY_FAILURE,
    DEFAULT_PRIORITY,
    MAX_RETRIES,
)
from app.queue.vocabulary.jobs import EnqueueRequest, JobEdit, JobFilters, Wanted
from app.queue.vocabulary.orders import NEWEST_FIRST, Sort
from app.queue.vocabulary.states import PRIORITIES
from app.queue.vocabulary.trace import Trace

DEFAULT_LIST_LIMIT = 50


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} has no fingerprint form")


class EnqueueBody(RequestModel):
    """``POST /jobs``: one new job. The idempotency key may come in the Idempotency-Key header
    instead (``header_key`` in the validation context); when both are sent they must agree."""

    type: JobType
    payload: JsonObject = Field(default_factory=dict)
    priority: Priority = DEFAULT_PRIORITY
    max_retries: MaxRetries = MAX_RETRIES.default
    idempotency_key: IdempotencyKey | None = Field(
        None,
        validate_default=True,
        description="Printable ASCII without spaces. Must equal the Idempotency-Key header.",
    )
    run_at: Timestamp | None = Field(None, description="Not with delay_seconds.")
    delay_seconds: Delay | None = Field(None, description="Not with run_at.")
    unique_key: UniqueKey | None = None
    unique_for: UniqueFor | None = None
    secrets: Secrets | None = None
    depends_on: Parents | None = None
    on_dependency_failure: DependencyFailure | None = None
    partition: Partition | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "required": ["run_at", "delay_seconds"],
                "properties": {"run_at": {"type": "string"}, "delay_seconds": {"type": "number"}},
            },
            "dependentRequired": {"unique_for": ["unique_key"]},
        }
    )

    # Fields that name a request rather than define it, left out of the fingerprint.
    not_fingerprinted: ClassVar[frozenset[str]] = frozenset({"idempotency_key"})
    # Fields added after jobs were first fingerprinted: only in the fingerprint when given, so
    # a request repeated from before they existed keeps its fingerprint.
    fingerprinted_when_given: ClassVar[frozenset[str]] = frozenset(
        {
            "unique_key",
            "unique_for",
            "secrets",
            "depends_on",
            "after_items",
            "on_dependency_failure",
            "partition",
        }
    )

    @field_validator("idempotency_key", mode="before")
    @classmethod
    def _header_agrees(cls, value: Any, info: ValidationInfo) -> Any:
        header = (info.context or {}).get("header_key")
        if header is None:
            return value
        if value is not None and value != header:
            raise refuse("differs from the Idempotency-Key header")
        return header

    @model_validator(mode="after")
    def _one_schedule(self) -> EnqueueBody:
        if self.run_at is not None and self.delay_seconds is not None:
            raise refuse("give run_at or delay_seconds, not both", field="run_at")
        if self.unique_for is not None and self.unique_key is None:
            raise refuse("needs a unique_key", field="unique_for")
        return self

    def fingerprint(self) -> str:
        """A digest of every field that defines the request (after defaults), so a repeated
        idempotency key with a different request is told apart. Fields come from the model."""
        values = {
            name: getattr(self, name)
            for name in type(self).model_fields
            if name not in self.not_fingerprinted
            and not (name in self.fingerprinted_when_given and getattr(self, name) is None)
        }
        if self.secrets is not None:  # the names only: the stored digest never hashes a value
            values["secrets"] = sorted(self.secrets)
        text = json.dumps(values, sort_keys=True, separators=(",", ":"), default=_jsonable)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_request(
        self, box: secret_fields.Sealer | None = None, *, trace: Trace | None = None
    ) -> EnqueueRequest:
        """The use cases' enqueue request, its secrets sealed with ``box`` (the one the body
        was validated with: a body with secrets was refused without one), with ``trace`` (the
        request's trace headers, read by the front end)."""
        sealed = None
        if self.secrets:
            assert box is not None, "validated without a secrets_box"
            sealed = secret_fields.seal(box, self.secrets)
        return EnqueueRequest(
            type=self.type,
            payload=self.payload,
            priority=PRIORITIES[self.priority],
            max_retries=self.max_retries,
            idempotency_key=self.idempotency_key,
            run_at=self.run_at,
            delay_seconds=self.delay_seconds,
            # Only a repeated idempotency key is compared with its first request.
            fingerprint=None if self.idempotency_key is None else self.fingerprint(),
            unique_key=self.unique_key,
            unique_for=self.unique_for,
            secret_names=tuple(self.secrets or ()),
            sealed_secrets=sealed,
            depends_on=tuple(dict.fromkeys(self.depends_on or ())),
            after_items=tuple(dict.fromkeys(getattr(self, "after_items", None) or ())),
            on_dependency_failure=self.on_dependency_failure or DEFAULT_ON_DEPENDENCY_FAILURE,
            partition=self.partition,
            trace=trace,
        )


class ClaimBody(RequestModel):
    """``POST /jobs/claim``: an optional lease instead of the job type's, the job types the
    worker runs, how many jobs it takes, and how long to wait for a job when none is due."""

    lease_seconds: LeaseSeconds | None = None
    types: ClaimTypes | None = None
    max_jobs: MaxJobs | None = None
    wait_seconds: WaitSeconds = 0.0

    def to_wanted(self) -> Wanted:
        """The use cases' claim (without ``max_jobs``: one job)."""
        types = tuple(self.types) if self.types else None
        return Wanted(self.max_jobs or 1, types, self.lease_seconds, self.wait_seconds)


class CompleteBody(RequestModel):
    """``POST /jobs/{id}/complete``: the worker's result and the attempt it holds."""

    result: JsonObject | None = None
    attempt: Attempt | None = None


class FailBody(RequestModel):
    """``POST /jobs/{id}/fail``: what went wrong, and whether and when to retry."""

    error: ErrorText
    attempt: Attempt | None = None
    retry_in: RetryIn | None = None
    retryable: Flag = True


class HeartbeatBody(RequestModel):
    """``POST /jobs/{id}/heartbeat``: progress from the worker holding the job."""

    progress: Progress | None = None
    message: Message | None = None
    attempt: Attempt | None = None


class NoBody(RequestModel):
    """No fields: an empty body or ``{}`` (cancel, run now)."""


class RetryBody(RequestModel):
    """``POST /jobs/{id}/retry``: the fields to replace as the job is retried (left out: kept;
    null is not a value), each validated as at enqueue, and why. No secrets: a finished job's
    secret values were erased, and the payload never holds them."""

    model_config = ConfigDict(json_schema_extra=without_null)

    payload: JsonObject | None = None
    priority: Priority | None = None
    max_retries: MaxRetries | None = None
    reason: Reason | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Defaults are not validated, so this only sees an explicit null.
        if value is None:
            raise refuse("must not be null (leave the field out to keep its value)")
        return value

    def to_edit(self) -> JobEdit:
        """The use cases' edit."""
        return JobEdit(
            payload=self.payload,
            priority=PRIORITIES[self.priority] if self.priority else None,
            max_retries=self.max_retries,
            reason=self.reason,
        )


class ListQuery(RequestModel):
    """``GET /jobs``: the list filters, from the query string (an empty value means "any")."""

    status: StatusLabel | None = None
    type: ListType | None = None
    priority: Priority | None = None
    limit: Limit = DEFAULT_LIST_LIMIT
    cursor: Cursor | None = None
    q: Search | None = None
    partition: Partition | None = None
    payload: PayloadQuery | None = None

    @field_validator("q", mode="before")
    @classmethod
    def _trimmed(cls, value: Any) -> Any:
        """Surrounding spaces of a search are ignored; a blank one means "any"."""
        return (value.strip() or None) if isinstance(value, str) else value

    @classmethod
    def from_args(cls, args: Mapping[str, str], settings: QueueSettings) -> ListQuery:
        """Validate a query string (see ``parse_query``)."""
        return parse_query(cls, args, settings)

    @model_validator(mode="after")
    def _cursor_of_this_order(self) -> ListQuery:
        if self.cursor is not None and self.cursor[0] != self.order().key:
            raise refuse("is a cursor of another order than this list's", field="cursor")
        return self

    def order(self) -> Sort:
        """The list's order: newest first (the pages offer others)."""
        return NEWEST_FIRST

    def to_filters(self) -> JobFilters:
        """The use cases' filters."""
        return JobFilters(
            status=self.status,
            type=self.type,
            priority=PRIORITIES[self.priority] if self.priority else None,
            search=self.q,
            partition=self.partition,
            payload=self.payload,
            limit=self.limit,
            cursor=self.cursor[1] if self.cursor else None,
            sort=self.order(),
        )


class JobQuery(RequestModel):
    """``GET /jobs/{id}``: how long to wait for the job to finish (0: answer at once)."""

    wait_seconds: WaitQuery = 0

    @classmethod
    def from_args(cls, args: Mapping[str, str], settings: QueueSettings) -> JobQuery:
        """Validate a query string (see ``parse_query``)."""
        return parse_query(cls, args, settings)
