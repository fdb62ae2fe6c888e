"""Audit log queries from strings (query args, CLI options): validation and paging."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import Connection

from app.audit import store
from app.audit.actions import AuditAction, AuditEvent, AuditFilters
from app.queue.errors import InvalidInput

FIELDS = frozenset({"actor", "action", "since", "until", "cursor", "limit"})
MAX_LIMIT = 200
MAX_ID = 2**62


@dataclass(frozen=True)
class AuditPage:
    """A page of events, newest first, and the cursor of the next (older) page."""

    events: list[AuditEvent]
    next_cursor: str | None


def _moment(raw: str, *, end_of_day: bool) -> datetime:
    """An ISO date (a whole UTC day) or an ISO datetime (naive means UTC)."""
    if len(raw) == 10:
        day = datetime.combine(date.fromisoformat(raw), datetime.min.time(), UTC)
        return day + timedelta(days=1) if end_of_day else day
    moment = datetime.fromisoformat(raw)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_filters(args: Mapping[str, str], default_limit: int = 50) -> AuditFilters:
    """Validate audit filters; every problem is reported per field (422)."""
    errors: dict[str, str] = {}
    for name in set(args) - FIELDS:
        errors[name] = "unknown field"
    actor = args.get("actor") or None
    if actor is not None and len(actor) > store.ACTOR_LENGTH:
        errors["actor"] = f"must be at most {store.ACTOR_LENGTH} characters"
    action = None
    if raw_action := args.get("action"):
        try:
            action = AuditAction(raw_action)
        except ValueError:
            errors["action"] = f"must be one of {', '.join(AuditAction)}"
    moments: dict[str, datetime | None] = {"since": None, "until": None}
    for name in moments:
        if raw := args.get(name):
            try:
                moments[name] = _moment(raw, end_of_day=name == "until")
            except (ValueError, OverflowError):
                errors[name] = "must be an ISO 8601 date or date-time"
    before_id = _number(args.get("cursor"), "cursor", 1, MAX_ID, errors)
    limit = _number(args.get("limit"), "limit", 1, MAX_LIMIT, errors) or default_limit
    if errors:
        raise InvalidInput(errors)
    return AuditFilters(actor, action, moments["since"], moments["until"], before_id, limit)


def _number(raw: str | None, name: str, low: int, high: int, errors: dict[str, str]) -> int | None:
    if not raw:
        return None
    if not raw.isascii() or not raw.isdigit() or not low <= int(raw[:20]) <= high:
        errors[name] = f"must be a whole number from {low} to {high}"
        return None
    return int(raw)


def audit_page(conn: Connection, filters: AuditFilters) -> AuditPage:
    """A page of the audit log (admins only: the callers check the role)."""
    events, more = store.page(conn, filters)
    return AuditPage(events, str(events[-1].id) if more and events else None)
