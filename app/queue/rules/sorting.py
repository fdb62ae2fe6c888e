"""The orders the jobs list offers, and where an index keeps each one: by creation for any
filter, by priority or run time among pending jobs (the claim index), by last change among
running and finished jobs. Any other pairing would read every matching job to sort them, or
need an index of its own that every write pays for; the list refuses it and says which status
to choose."""

from __future__ import annotations

from app.queue.vocabulary.orders import Sort, SortKey
from app.queue.vocabulary.states import TERMINAL, JobStatus

# The statuses within which an index keeps each order (None: any filter).
SERVED_WITHIN: dict[SortKey, frozenset[str] | None] = {
    SortKey.CREATED: None,
    SortKey.PRIORITY: frozenset({JobStatus.PENDING}),
    SortKey.RUN_AT: frozenset({JobStatus.PENDING}),
    SortKey.UPDATED: frozenset({JobStatus.RUNNING, *TERMINAL}),
}


def unserved(sort: Sort, status: str | None) -> str | None:
    """Why the list cannot be kept in ``sort`` for the ``status`` filter (None: it can)."""
    within = SERVED_WITHIN[sort.key]
    if within is None or status in within:
        return None
    *others, last = sorted(within)
    statuses = f"{', '.join(others)} or {last}" if others else last
    return f"by {sort.key} needs the status filter set to {statuses}"
