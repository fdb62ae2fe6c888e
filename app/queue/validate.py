"""Turn untrusted request data into validated values, or raise ``InvalidInput`` per field.

The JSON API and the HTML forms both go through these functions, so a rule holds whichever
front end a request came through.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from app.queue.errors import InvalidInput
from app.queue.models import EnqueueRequest, JobFilters, QueueSettings
from app.queue.states import PRIORITIES, JobStatus

MAX_RETRIES_LIMIT = 25
MAX_DELAY_SECONDS = 366 * 86_400
MAX_LIST_LIMIT = 1000
MAX_KEY_LENGTH = 255
MAX_MESSAGE_LENGTH = 500
MAX_DB_INT = 2**62
MAX_WAIT_SECONDS = 30  # a long-polling claim waits at most this long (DESIGN §8.1)
_CURSOR_PREFIX = "v1:"
_KEY_CHARS = re.compile(r"[\x21-\x7e]{1,255}")  # printable ASCII, no spaces
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_unknown(body: Mapping[str, Any], allowed: set[str]) -> dict[str, str]:
    return {name: "unknown field" for name in body if name not in allowed}


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text on every backend (NUL, lone surrogates), or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    if _LONE_SURROGATE.search(value):
        return "must be valid Unicode (no lone surrogates)"
    return None


def is_int(value: Any) -> bool:
    """True for JSON integers only (``true`` is not an integer)."""
    return type(value) is int


def is_number(value: Any) -> bool:
    """True for finite JSON numbers, booleans excluded."""
    return type(value) in (int, float) and math.isfinite(value)


class MalformedJSON(ValueError):
    """The text is not strict JSON: malformed, duplicate keys, NaN/Infinity, or too deep."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise MalformedJSON(f"duplicate key {key!r} in JSON object")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise MalformedJSON(f"{name} is not valid JSON")


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests (a scalar is 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def decode_json(text: str, max_depth: int) -> Any:
    """``json.loads`` that refuses what the API refuses; raises ``MalformedJSON`` saying why."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    except RecursionError:
        raise MalformedJSON(f"JSON nests deeper than {max_depth} levels") from None
    except MalformedJSON:
        raise
    except ValueError as exc:
        raise MalformedJSON(f"malformed JSON: {exc}") from None
    if json_depth(value) > max_depth:
        raise MalformedJSON(f"JSON nests deeper than {max_depth} levels")
    return value


def json_value_problem(value: Any, max_depth: int) -> str | None:
    """Why a decoded JSON value cannot be stored (depth, NUL, surrogates), or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nests deeper than {max_depth} levels"
        if isinstance(item, dict):
            for key, child in item.items():
                if problem := text_problem(key):
                    return f"keys {problem}"
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            if problem := text_problem(item):
                return f"strings {problem}"
        elif isinstance(item, float) and not math.isfinite(item):
            return "numbers must be finite"
    return None


def json_object(value: Any, field: str, settings: QueueSettings, errors: dict[str, str]) -> None:
    """Check that ``value`` is a storable JSON object within the payload byte limit."""
    if not isinstance(value, dict):
        errors[field] = "must be a JSON object"
        return
    if problem := json_value_problem(value, settings.max_json_depth):
        errors[field] = problem
        return
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > settings.max_payload_bytes:
        errors[field] = f"is {size} bytes; the limit is {settings.max_payload_bytes}"


def parse_datetime(value: Any) -> datetime | str:
    """An aware UTC datetime from an ISO 8601 string, or the reason it is not one."""
    if not isinstance(value, str) or len(value) > 64:
        return "must be an ISO 8601 timestamp string"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return "must be an ISO 8601 timestamp, e.g. 2026-01-31T12:00:00Z"
    if parsed.tzinfo is None:
        return "must include a UTC offset, e.g. Z or +02:00"
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        return "is out of range"


def idempotency_key_problem(value: Any) -> str | None:
    """Why ``value`` is not a usable idempotency key, or None."""
    if not isinstance(value, str):
        return "must be a string"
    if not _KEY_CHARS.fullmatch(value):
        return f"must be 1-{MAX_KEY_LENGTH} printable ASCII characters without spaces"
    return None


ENQUEUE_FIELDS = {
    "type",
    "payload",
    "priority",
    "max_retries",
    "idempotency_key",
    "run_at",
    "delay_seconds",
}


def parse_enqueue(
    body: Mapping[str, Any], settings: QueueSettings, *, header_key: str | None = None
) -> EnqueueRequest:
    """Validate an enqueue request; ``header_key`` is the ``Idempotency-Key`` header."""
    errors = _reject_unknown(body, ENQUEUE_FIELDS)
    job_type = body.get("type")
    if not isinstance(job_type, str):
        errors["type"] = "is required and must be a string"
    elif job_type not in settings.job_types:
        errors["type"] = "is not an allowed job type"
    payload = body.get("payload", {})
    json_object(payload, "payload", settings, errors)
    priority = body.get("priority", "low")
    if not isinstance(priority, str) or priority not in PRIORITIES:  # lists are unhashable
        errors["priority"] = f"must be one of {', '.join(PRIORITIES)}"
    max_retries = body.get("max_retries", 3)
    if not is_int(max_retries) or not 0 <= max_retries <= MAX_RETRIES_LIMIT:
        errors["max_retries"] = f"must be an integer from 0 to {MAX_RETRIES_LIMIT}"
    key = _idempotency_key(body.get("idempotency_key"), header_key, errors)
    run_at, delay = _schedule(body, errors)
    if errors:
        raise InvalidInput(errors)
    normalized = {
        "type": job_type,
        "payload": payload,
        "priority": priority,
        "max_retries": max_retries,
        "run_at": run_at.isoformat() if run_at else None,
        "delay_seconds": delay,
    }
    fingerprint = hashlib.sha256(
        json.dumps(normalized, sort_keys=True, separators=(",", ":")).encode("utf-8")
    ).hexdigest()
    return EnqueueRequest(
        type=job_type,  # type: ignore[arg-type]
        payload=payload,
        priority=PRIORITIES[priority],
        max_retries=max_retries,
        idempotency_key=key,
        run_at=run_at,
        delay_seconds=delay,
        fingerprint=fingerprint,
    )


def _idempotency_key(body_key: Any, header_key: str | None, errors: dict[str, str]) -> str | None:
    if body_key is None and header_key is None:
        return None
    if body_key is not None and header_key is not None and body_key != header_key:
        errors["idempotency_key"] = "differs from the Idempotency-Key header"
        return None
    key = body_key if body_key is not None else header_key
    if problem := idempotency_key_problem(key):
        errors["idempotency_key"] = problem
        return None
    return key


def _schedule(
    body: Mapping[str, Any], errors: dict[str, str]
) -> tuple[datetime | None, float | None]:
    run_at_raw, delay = body.get("run_at"), body.get("delay_seconds")
    if run_at_raw is not None and delay is not None:
        errors["run_at"] = "give run_at or delay_seconds, not both"
        return None, None
    if run_at_raw is not None:
        parsed = parse_datetime(run_at_raw)
        if isinstance(parsed, str):
            errors["run_at"] = parsed
            return None, None
        return parsed, None
    if delay is not None:
        if not is_number(delay) or not 0 <= delay <= MAX_DELAY_SECONDS:
            errors["delay_seconds"] = f"must be a number from 0 to {MAX_DELAY_SECONDS}"
            return None, None
        return None, float(delay)
    return None, None


def parse_claim(body: Mapping[str, Any], settings: QueueSettings) -> tuple[int | None, float]:
    """The requested lease in seconds (None: the job type's default) and the long-poll wait."""
    errors = _reject_unknown(body, {"lease_seconds", "wait_seconds"})
    lease = body.get("lease_seconds")
    if lease is not None and (not is_int(lease) or not 1 <= lease <= settings.max_lease_seconds):
        errors["lease_seconds"] = f"must be an integer from 1 to {settings.max_lease_seconds}"
    wait = body.get("wait_seconds", 0)
    if not is_number(wait) or not 0 <= wait <= MAX_WAIT_SECONDS:
        errors["wait_seconds"] = f"must be a number from 0 to {MAX_WAIT_SECONDS}"
    if errors:
        raise InvalidInput(errors)
    return lease, float(wait)


def _attempt(body: Mapping[str, Any], errors: dict[str, str]) -> int | None:
    attempt = body.get("attempt")
    if attempt is not None and (not is_int(attempt) or not 1 <= attempt <= MAX_DB_INT):
        errors["attempt"] = "must be a positive integer"
        return None
    return attempt


def parse_complete(body: Mapping[str, Any], settings: QueueSettings) -> tuple[Any, int | None]:
    """``(result, attempt)`` of a complete request."""
    errors = _reject_unknown(body, {"result", "attempt"})
    result = body.get("result")
    if result is not None:
        json_object(result, "result", settings, errors)
    attempt = _attempt(body, errors)
    if errors:
        raise InvalidInput(errors)
    return result, attempt


def parse_fail(
    body: Mapping[str, Any],
) -> tuple[str, int | None, float | None, bool]:
    """``(error, attempt, retry_in, retryable)`` of a fail request."""
    errors = _reject_unknown(body, {"error", "attempt", "retry_in", "retryable"})
    error = body.get("error")
    if not isinstance(error, str) or not error.strip():
        errors["error"] = "is required and must be a non-empty string"
    attempt = _attempt(body, errors)
    retry_in = body.get("retry_in")
    if retry_in is not None and (not is_number(retry_in) or not 0 <= retry_in <= MAX_DELAY_SECONDS):
        errors["retry_in"] = f"must be a number of seconds from 0 to {MAX_DELAY_SECONDS}"
    retryable = body.get("retryable", True)
    if not isinstance(retryable, bool):
        errors["retryable"] = "must be true or false"
    if errors:
        raise InvalidInput(errors)
    return error, attempt, retry_in, retryable  # type: ignore[return-value]


def parse_heartbeat(body: Mapping[str, Any]) -> tuple[int | None, str | None, int | None]:
    """``(progress, message, attempt)`` of a heartbeat request."""
    errors = _reject_unknown(body, {"progress", "message", "attempt"})
    progress = body.get("progress")
    if progress is not None and (not is_int(progress) or not 0 <= progress <= 100):
        errors["progress"] = "must be an integer from 0 to 100"
    message = body.get("message")
    if message is not None:
        if not isinstance(message, str) or len(message) > MAX_MESSAGE_LENGTH:
            errors["message"] = f"must be a string of at most {MAX_MESSAGE_LENGTH} characters"
        elif problem := text_problem(message):
            errors["message"] = problem
    attempt = _attempt(body, errors)
    if errors:
        raise InvalidInput(errors)
    return progress, message, attempt


LIST_FIELDS = {"status", "type", "priority", "limit", "cursor", "q"}


def parse_filters(args: Mapping[str, str], *, allowed: set[str] | None = None) -> JobFilters:
    """Validate listing filters from a query string. A multi-dict (with ``getlist``, like
    Flask's ``request.args``) may not repeat a name: two statuses would be ambiguous."""
    errors = _reject_unknown(args, allowed or LIST_FIELDS)
    if getlist := getattr(args, "getlist", None):
        errors |= {name: "must be given at most once" for name in args if len(getlist(name)) > 1}
    status = args.get("status") or None
    if status is not None and status not in set(JobStatus):
        errors["status"] = f"must be one of {', '.join(JobStatus)}"
    job_type = args.get("type") or None
    if job_type is not None and (len(job_type) > 200 or text_problem(job_type)):
        errors["type"] = "is not a valid job type"
    priority = args.get("priority") or None
    if priority is not None and priority not in PRIORITIES:
        errors["priority"] = f"must be one of {', '.join(PRIORITIES)}"
    limit = _parse_limit(args.get("limit"), errors)
    before_id, after_id = _parse_cursor(args.get("cursor"), errors)
    search = (args.get("q") or "").strip() or None
    if search is not None and (len(search) > MAX_KEY_LENGTH or text_problem(search)):
        errors["q"] = "must be a job id or an idempotency key"
    if errors:
        raise InvalidInput(errors)
    return JobFilters(
        status=status,
        type=job_type,
        priority=PRIORITIES[priority] if priority else None,
        search=search,
        limit=limit,
        before_id=before_id,
        after_id=after_id,
    )


def _parse_limit(raw: str | None, errors: dict[str, str]) -> int:
    if raw is None or raw == "":
        return 50
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIST_LIMIT:
        errors["limit"] = f"must be an integer from 1 to {MAX_LIST_LIMIT}"
        return 50
    return int(raw)


def encode_cursor(direction: str, job_id: int) -> str:
    """An opaque cursor: ``direction`` is ``before`` (older) or ``after`` (newer)."""
    raw = f"{_CURSOR_PREFIX}{direction}:{job_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _parse_cursor(raw: str | None, errors: dict[str, str]) -> tuple[int | None, int | None]:
    if not raw:
        return None, None
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        text = ""
    parts = text.removeprefix(_CURSOR_PREFIX).split(":")
    if (
        not text.startswith(_CURSOR_PREFIX)
        or len(parts) != 2
        or parts[0] not in ("before", "after")
        or not parts[1].isdigit()
        or int(parts[1]) > MAX_DB_INT
    ):
        errors["cursor"] = "is not a cursor this server issued"
        return None, None
    job_id = int(parts[1])
    return (job_id, None) if parts[0] == "before" else (None, job_id)
