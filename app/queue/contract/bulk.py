"""The request and response models of ``POST /jobs/bulk``: which jobs, what to do to them, why,
and the count the operator confirmed."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, RootModel

from app.queue.contract.cursors import MAX_DB_INT
from app.queue.contract.fields import ListType, Priority, Search, StatusLabel, Timestamp
from app.queue.contract.job_responses import JobOut, Problem, ResponseModel
from app.queue.contract.payload_search import PayloadObject
from app.queue.contract.request_model import RequestModel, refuse, says
from app.queue.rules.sanitize import sanitize_error
from app.queue.usecases.bulk import SAMPLE_SIZE, Selection, Verb
from app.queue.vocabulary.jobs import JobFilters
from app.queue.vocabulary.states import PRIORITIES

MAX_REASON_LENGTH = 200
# Sanitizing may lengthen a reason (a redaction marker); this keeps the event note under 500.
MAX_REASON_BYTES = 400
# At least one character that is not a space, a control or a bidi control (JSON Schema syntax,
# which Python's re reads the same way).
VISIBLE = "[^\\s\\u0000-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069]"
_VISIBLE = re.compile(VISIBLE)


def _clean_reason(value: str) -> str:
    """The reason as stored: secrets and control characters removed (anyone who sees a job
    reads its events), and something left to read."""
    clean = sanitize_error(value.strip(), MAX_REASON_BYTES)
    if not _VISIBLE.search(clean):
        raise refuse("must say why in visible characters")
    return clean


Reason = Annotated[
    str,
    Field(min_length=1, max_length=MAX_REASON_LENGTH, json_schema_extra={"pattern": VISIBLE}),
    AfterValidator(_clean_reason),
    says(f"is required: 1-{MAX_REASON_LENGTH} characters saying why"),
    Field(description="Why; recorded in the audit log and in each changed job's event."),
]
ExpectCount = Annotated[
    int,
    Field(ge=0, le=MAX_DB_INT),
    says("must be a non-negative integer: the count of the preview"),
    Field(description="The preview's count. Absent: preview only, nothing changes."),
]
BulkAction = Annotated[
    Literal["cancel", "retry", "delete"],
    says("must be one of cancel, retry, delete"),
    Field(description="cancel pending/running, retry failed/cancelled, delete finished jobs."),
]


class BulkFilter(RequestModel):
    """Which jobs: the filters of ``GET /jobs``, and a creation window (exclusive bounds)."""

    status: StatusLabel | None = None
    type: ListType | None = None
    priority: Priority | None = None
    q: Search | None = None
    payload: PayloadObject | None = None
    created_after: Timestamp | None = None
    created_before: Timestamp | None = None


class BulkChoice(RequestModel):
    """An action and the jobs it is for: what a preview needs."""

    action: BulkAction
    filter: BulkFilter

    def to_selection(self) -> Selection:
        """The domain's selection of jobs."""
        given = self.filter
        search = given.q.strip() if given.q else None  # as the jobs page searches
        filters = JobFilters(
            status=given.status,
            type=given.type,
            priority=PRIORITIES[given.priority] if given.priority else None,
            search=search or None,
            payload=given.payload,
        )
        return Selection(Verb(self.action), filters, given.created_after, given.created_before)


class BulkBody(BulkChoice):
    """``POST /jobs/bulk``: without ``expect_count`` a preview; with it, the operation."""

    reason: Reason
    expect_count: ExpectCount | None = None


class BulkPreview(ResponseModel):
    """How many jobs the action would change (exactly those), and the newest of them."""

    count: Annotated[int, Field(ge=0)]
    sample: Annotated[list[JobOut], Field(max_length=SAMPLE_SIZE)]


class BulkApplied(ResponseModel):
    """The operation (its audit event's id, named in each changed job's event) and how many
    jobs it changed (fewer than the count when some changed in between)."""

    operation: Annotated[int, Field(ge=1)]
    affected: Annotated[int, Field(ge=0)]


class BulkResponse(RootModel[BulkPreview | BulkApplied]):
    """A preview (without ``expect_count``) or the applied operation (with it)."""


class StaleCountProblem(Problem):
    """409: the selection no longer holds ``expect_count`` jobs; ``count`` is what it holds
    (absent when another bulk operation was still being applied after a wait: try again)."""

    count: Annotated[int, Field(ge=0)] | None = None
