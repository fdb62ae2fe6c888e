"""The rows of per-type flow control: what admins set over the configuration, and the claims
counted in a rate limit's window (a type's, or one partition's of a type)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple


class Overridden(NamedTuple):
    """The values of an override, as the claim reads them."""

    max_running: int | None
    rate_limit: str | None
    paused: bool | None
    max_run_seconds: int | None
    partition_max_running: int | None
    partition_rate_limit: str | None


@dataclass(frozen=True)
class Override:
    """One row of ``type_overrides``: what an admin set over the configuration (None: the
    configuration's value applies), by whom and when."""

    type: str
    max_running: int | None
    rate_limit: str | None
    paused: bool | None
    max_run_seconds: int | None
    partition_max_running: int | None
    partition_rate_limit: str | None
    updated_by: str | None
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Override:
        """Build an override from a ``type_overrides`` row mapping."""
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Window:
    """One row of ``type_claim_windows`` (or ``partition_claim_windows``): the claims counted
    in the window that started at ``started_at``."""

    started_at: datetime
    claims: int
