"""Audit log queries from strings (query args, CLI options): the query model that validates
them (and that the API document describes), paging, and the answer's models."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, PlainValidator, WithJsonSchema
from sqlalchemy import Connection

from app.audit import store as audit_store
from app.audit.actions import AuditAction, AuditEvent, AuditFilters
from app.queue.contract.job_responses import Instant, ResponseModel
from app.queue.contract.request_model import RequestModel, parse_query, refuse, says
from app.queue.contract.strictjson import text_problem
from app.queue.vocabulary.timeutil import iso

MAX_LIMIT = 200
MAX_ID = 2**62
# A date, or a date-time with an optional offset (none: UTC); the parser checks the values.
MOMENT_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$"
)
_MOMENT = re.compile(MOMENT_PATTERN)


@dataclass(frozen=True)
class AuditPage:
    """A page of events, newest first, and the cursor of the next (older) page."""

    events: list[AuditEvent]
    next_cursor: str | None


DAY_EXAMPLE = "2026-12-01"  # the audit page's hint and the error both show it


def _moment(raw: str, *, end_of_day: bool) -> datetime:
    """An ISO date (a whole UTC day) or an ISO datetime (naive means UTC)."""
    if len(raw) == 10:
        day = datetime.combine(date.fromisoformat(raw), datetime.min.time(), UTC)
        return day + timedelta(days=1) if end_of_day else day
    moment = datetime.fromisoformat(raw)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _moment_of(*, end_of_day: bool) -> Callable[[Any], datetime]:
    def parse(raw: Any) -> datetime:
        try:
            if not isinstance(raw, str) or not _MOMENT.match(raw):
                raise ValueError(raw)
            return _moment(raw, end_of_day=end_of_day)
        except (ValueError, OverflowError):
            raise refuse(f"must be a UTC day like {DAY_EXAMPLE} or an ISO 8601 date-time") from None

    return parse


def _whole(low: int, high: int) -> Callable[[Any], int]:
    def parse(raw: Any) -> int:
        if (
            not isinstance(raw, str)
            or not raw.isascii()
            or not raw.isdigit()
            or not low <= int(raw[:20]) <= high
        ):
            raise refuse(f"must be a whole number from {low} to {high}")
        return int(raw)

    return parse


def _action(raw: Any) -> AuditAction:
    try:
        return AuditAction(raw)
    except ValueError:
        raise refuse(f"must be one of {', '.join(AuditAction)}") from None


def _stored_text(value: str) -> str:
    if problem := text_problem(value):  # a text column cannot even compare a NUL
        raise refuse(problem)
    return value


def _moment_schema(description: str) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "pattern": MOMENT_PATTERN, "description": description})


def _whole_schema(high: int, description: str) -> WithJsonSchema:
    schema = {"type": "integer", "minimum": 1, "maximum": high, "description": description}
    return WithJsonSchema(schema)


class AuditQuery(RequestModel):
    """``GET /audit``, the audit page and ``flask audit list``: filters and a page."""

    actor: (
        Annotated[
            str,
            Field(
                max_length=audit_store.ACTOR_LENGTH, json_schema_extra={"pattern": "^[^\\u0000]*$"}
            ),
            AfterValidator(_stored_text),
            says(f"must be at most {audit_store.ACTOR_LENGTH} characters"),
            Field(description="Exactly this actor (a user name, or cli:<OS user>)."),
        ]
        | None
    ) = None
    action: (
        Annotated[
            AuditAction,
            PlainValidator(_action),
            WithJsonSchema({"type": "string", "enum": [a.value for a in AuditAction]}),
        ]
        | None
    ) = None
    since: (
        Annotated[
            datetime,
            PlainValidator(_moment_of(end_of_day=False)),
            _moment_schema("From this date (UTC) or date-time (no offset: UTC) on."),
        ]
        | None
    ) = None
    until: (
        Annotated[
            datetime,
            PlainValidator(_moment_of(end_of_day=True)),
            _moment_schema("Up to this date (inclusive, UTC) or date-time (excluded)."),
        ]
        | None
    ) = None
    cursor: (
        Annotated[
            int,
            PlainValidator(_whole(1, MAX_ID)),
            _whole_schema(MAX_ID, "The next_cursor of the previous page: events older than it."),
        ]
        | None
    ) = None
    limit: (
        Annotated[
            int, PlainValidator(_whole(1, MAX_LIMIT)), _whole_schema(MAX_LIMIT, "Page size (50).")
        ]
        | None
    ) = None


def parse_filters(args: Mapping[str, str], default_limit: int = 50) -> AuditFilters:
    """Validate audit filters; every problem is reported per field (422)."""
    query = parse_query(AuditQuery, args)
    limit = query.limit or default_limit
    return AuditFilters(query.actor, query.action, query.since, query.until, query.cursor, limit)


def audit_page(conn: Connection, filters: AuditFilters) -> AuditPage:
    """A page of the audit log (admins only: the callers check the role)."""
    events, more = audit_store.page(conn, filters)
    return AuditPage(events, str(events[-1].id) if more and events else None)


class AuditEventOut(ResponseModel):
    """One audit event: who did what to which target, when, from which address."""

    model_config = ConfigDict(title="AuditEvent")

    id: Annotated[int, Field(ge=1)]
    at: Instant
    actor: str
    action: Annotated[str, Field(json_schema_extra={"enum": [a.value for a in AuditAction]})]
    target: str | None
    details: dict[str, Any] | None
    client_address: str | None


class AuditEvents(ResponseModel):
    """A page of audit events, newest first."""

    events: list[AuditEventOut]
    next_cursor: Annotated[
        str | None, Field(description="Pass as `cursor` for older events; null at the end.")
    ]


def audit_page_out(page: AuditPage) -> AuditEvents:
    """``GET /audit``'s answer: the page's events, newest first, and the next page's cursor."""
    events = [
        AuditEventOut.built(
            {
                "id": event.id,
                "at": iso(event.at),
                "actor": event.actor,
                "action": event.action,
                "target": event.target,
                "details": event.details,
                "client_address": event.client_address,
            }
        )
        for event in page.events
    ]
    return AuditEvents.built({"events": events, "next_cursor": page.next_cursor})
