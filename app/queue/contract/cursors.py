"""Opaque list cursors: which side of which job the next page starts, in which order. In the
order of creation a cursor names a job id (``v1``, what clients of ``GET /jobs`` hold); in the
other ``orders`` it carries the job's sort key (``v2``)."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from app.queue.vocabulary.jobs import Keyset
from app.queue.vocabulary.orders import KEY_TYPES, SortKey

MAX_DB_INT = 2**62
_PREFIX = "v1:"
_KEYED = "v2:"
_DIRECTIONS = ("before", "after")


def encode_cursor(direction: str, job_id: int) -> str:
    """An opaque cursor: ``direction`` is ``before`` (older) or ``after`` (newer)."""
    return _opaque(f"{_PREFIX}{direction}:{job_id}")


def encode_keyset(sort: SortKey, keyset: Keyset) -> str:
    """The cursor of ``keyset`` in the order ``sort`` (a job id's own form by creation)."""
    if sort is SortKey.CREATED:
        return encode_cursor(keyset.direction, int(keyset.key[0]))
    values = [value.isoformat() if isinstance(value, datetime) else value for value in keyset.key]
    return _opaque(_KEYED + json.dumps([str(sort), keyset.direction, values]))


def _opaque(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(raw: str) -> tuple[SortKey, Keyset]:
    """The order and the keyset of a cursor this server issued; ``ValueError`` for any
    other."""
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        text = ""
    found = _by_id(text) if text.startswith(_PREFIX) else _by_key(text)
    if found is None:
        raise ValueError("is not a cursor this server issued")
    return found


def _by_id(text: str) -> tuple[SortKey, Keyset] | None:
    parts = text.removeprefix(_PREFIX).split(":")
    if len(parts) != 2 or parts[0] not in _DIRECTIONS or not parts[1].isdigit():
        return None
    job_id = int(parts[1])
    return (SortKey.CREATED, Keyset(parts[0], (job_id,))) if job_id <= MAX_DB_INT else None


def _by_key(text: str) -> tuple[SortKey, Keyset] | None:
    if not text.startswith(_KEYED):
        return None
    try:
        sort, direction, values = json.loads(text.removeprefix(_KEYED))
        key = SortKey(sort)
    except (ValueError, TypeError):
        return None
    types = KEY_TYPES[key]
    if direction not in _DIRECTIONS or not isinstance(values, list) or len(values) != len(types):
        return None
    parsed = [_value(kind, value) for kind, value in zip(types, values, strict=True)]
    if key is SortKey.CREATED or any(value is None for value in parsed):
        return None
    return key, Keyset(direction, tuple(parsed))


def _value(kind: type, value: Any) -> int | datetime | None:
    """A key value of the expected kind (an id or priority within the database's integers, a
    time with its offset), or None."""
    if kind is int:
        ok = type(value) is int and 0 <= value <= MAX_DB_INT
        return value if ok else None
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None
