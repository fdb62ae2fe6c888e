"""A schedule as the SQL returns it: one row of ``schedules``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.queue.vocabulary.states import priority_label


@dataclass(frozen=True)
class Schedule:
    """One row of ``schedules``."""

    id: int
    name: str
    cron: str
    timezone: str
    type: str
    payload: dict[str, Any]
    priority: int
    enabled: bool
    catch_up: str
    next_run_at: datetime | None
    last_run_at: datetime | None
    created_by: int
    created_at: datetime
    updated_at: datetime
    partition: str | None  # of the jobs it enqueues; None: the partition null

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Schedule:
        """Build a schedule from a ``schedules`` row mapping."""
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    @property
    def priority_label(self) -> str:
        return priority_label(self.priority)
