"""Opaque list cursors: which side of which job id the next page starts."""

from __future__ import annotations

import base64
import binascii

MAX_DB_INT = 2**62
_PREFIX = "v1:"


def encode_cursor(direction: str, job_id: int) -> str:
    """An opaque cursor: ``direction`` is ``before`` (older) or ``after`` (newer)."""
    raw = f"{_PREFIX}{direction}:{job_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(raw: str) -> tuple[int | None, int | None]:
    """``(before_id, after_id)`` of a cursor this server issued; ``ValueError`` for any other."""
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        text = ""
    parts = text.removeprefix(_PREFIX).split(":")
    if (
        not text.startswith(_PREFIX)
        or len(parts) != 2
        or parts[0] not in ("before", "after")
        or not parts[1].isdigit()
        or int(parts[1]) > MAX_DB_INT
    ):
        raise ValueError("is not a cursor this server issued")
    job_id = int(parts[1])
    return (job_id, None) if parts[0] == "before" else (None, job_id)
