"""The orders the jobs list can be in, and each one's key: the columns a page is ordered and
cut by (``KEY_COLUMNS``), their types in a cursor (``KEY_TYPES``) and a job's values of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.queue.vocabulary.states import TERMINAL


class SortKey(StrEnum):
    """What a list is ordered by (then by id, so every order is total)."""

    CREATED = "created"
    PRIORITY = "priority"  # then run time, soonest first: the order claims take
    RUN_AT = "run_at"
    UPDATED = "updated"  # a running job's last heartbeat, a finished job's finish


@dataclass(frozen=True)
class Sort:
    """An order and its direction; written ``created`` (ascending) or ``-created``."""

    key: SortKey = SortKey.CREATED
    descending: bool = True

    @classmethod
    def parse(cls, text: str) -> Sort:
        """``-priority`` and the like; ValueError names the orders there are."""
        try:
            return cls(SortKey(text.removeprefix("-")), text.startswith("-"))
        except ValueError:
            names = ", ".join(f"{key}, -{key}" for key in SortKey)
            raise ValueError(f"must be one of {names}") from None

    def __str__(self) -> str:
        return f"{'-' if self.descending else ''}{self.key}"


NEWEST_FIRST = Sort()
# Each order's key, column by column, and whether the column ascends when the order does:
# ``priority`` ascending is the claim order reversed, so ``-priority`` is the claim order.
KEY_COLUMNS: dict[SortKey, tuple[tuple[str, bool], ...]] = {
    SortKey.CREATED: (("id", True),),
    SortKey.PRIORITY: (("priority", True), ("run_at", False), ("id", False)),
    SortKey.RUN_AT: (("run_at", True), ("id", True)),
    SortKey.UPDATED: (("changed_at", True), ("id", True)),
}
KEY_TYPES: dict[SortKey, tuple[type, ...]] = {
    SortKey.CREATED: (int,),
    SortKey.PRIORITY: (int, datetime, int),
    SortKey.RUN_AT: (datetime, int),
    SortKey.UPDATED: (datetime, int),
}


def key_of(key: SortKey, job: Any) -> tuple[Any, ...]:
    """``job``'s values of the order ``key`` (a running job's last change is its last
    heartbeat; a finished job's, its finish)."""
    values = {
        "id": job.id,
        "priority": job.priority,
        "run_at": job.run_at,
        "changed_at": job.finished_at if job.status in TERMINAL else job.updated_at,
    }
    return tuple(values[name] for name, _ in KEY_COLUMNS[key])


def in_order(jobs: Sequence[Any], key: SortKey, ascending: bool) -> list[Any]:
    """``jobs`` in the order ``key`` (ascending, or its reverse)."""
    ordered = list(jobs)
    # One stable sort per column, the last column first: columns may run opposite ways.
    for position, (_, up) in reversed(list(enumerate(KEY_COLUMNS[key]))):
        ordered.sort(key=lambda job: key_of(key, job)[position], reverse=up != ascending)
    return ordered
