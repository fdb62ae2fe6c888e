"""The wall clock, read only at the edges (views, CLI) and passed inward as ``now``."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)
