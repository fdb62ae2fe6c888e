"""The jobs list: a page in one of the ``orders`` with keyset cursors both ways, and how
many jobs match (exact from the counts the database keeps, otherwise counted up to a cap)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection

from app.queue.contract.cursors import encode_keyset
from app.queue.rules import sorting
from app.queue.rules.visibility import viewer
from app.queue.sql import jobs as jobs_sql
from app.queue.sql import sorted_pages as sorted_pages_sql
from app.queue.sql import totals as totals_sql
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.errors import InvalidInput
from app.queue.vocabulary.jobs import Job, JobFilters, JobPage, Keyset
from app.queue.vocabulary.orders import SortKey, key_of

COUNT_CAP = 10_000  # a total the counters do not know is counted this far and no further


@dataclass(frozen=True)
class Total:
    """How many jobs match: ``count`` exactly, or at least ``count`` when not ``exact``."""

    count: int
    exact: bool


def page(conn: Connection, actor: Actor, filters: JobFilters) -> JobPage:
    """A page of the jobs ``actor`` may see, in the filters' order, with the cursors of the
    next and the previous page (None at either end). An order no index keeps within the
    filters is refused (422 on ``sort``)."""
    seen = viewer(actor)
    if why := sorting.unserved(filters.sort, filters.status):
        raise InvalidInput({"sort": why})
    if filters.sort.key is SortKey.CREATED:
        found, more = jobs_sql.list_jobs(conn, filters, seen)
    else:
        found, more = sorted_pages_sql.page(conn, filters, seen)
    cursor, descending = filters.cursor, filters.sort.descending
    onward, back = ("before", "after") if descending else ("after", "before")
    came_back = cursor is not None and cursor.direction == back
    return JobPage(
        jobs=found,
        next_cursor=_at(filters, onward, found[-1]) if found and (more or came_back) else None,
        prev_cursor=_at(filters, back, found[0])
        if found and cursor is not None and (more or not came_back)
        else None,
    )


def _at(filters: JobFilters, direction: str, job: Job) -> str:
    """The cursor of the page that starts past ``job`` in ``direction``."""
    key = filters.sort.key
    return encode_keyset(key, Keyset(direction, key_of(key, job)))


def total(conn: Connection, actor: Actor, filters: JobFilters) -> Total:
    """How many jobs ``actor`` may see match ``filters`` (the page and cursor aside)."""
    seen = viewer(actor)
    if totals_sql.known(filters):
        return Total(totals_sql.counted(conn, filters, seen), exact=True)
    found = totals_sql.counted_up_to(conn, filters, seen, COUNT_CAP + 1)
    return Total(min(found, COUNT_CAP), exact=found <= COUNT_CAP)
