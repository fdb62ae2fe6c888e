"""Rows written from a batch's items (``dialects.items``): the jobs of an enqueue and the events
of any batch, each in one statement whatever the batch size, in the items' order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Insert, Table, insert, select

from app.queue.sql import dialects
from app.queue.sql.dialects import Dialect
from app.queue.sql.items import Columns, Kind, parameter
from app.queue.sql.prepared import Prepared
from app.storage.schema import job_events


def insert_rows(dialect: Dialect, table: Table, columns: Columns) -> Insert:
    """The INSERT of the items' rows into ``table`` (columns named alike), in the items' order."""
    items = dialect.items(columns)
    values = [dialect.item_value(items, name, kind) for name, kind in columns]
    rows = select(*values).order_by(items.c.position)
    return insert(table).from_select([name for name, _ in columns], rows)


EVENT_ITEMS: Columns = (
    ("job_id", Kind.BIGINT),
    ("at", Kind.TIMESTAMP),
    ("from_status", Kind.TEXT),
    ("to_status", Kind.TEXT),
    ("actor", Kind.TEXT),
    ("attempt", Kind.INTEGER),
    ("kind", Kind.TEXT),
    ("error", Kind.TEXT),
    ("note", Kind.TEXT),
)


@lru_cache(maxsize=4)
def _insert_events(dialect: Dialect) -> Prepared:
    return Prepared(insert_rows(dialect, job_events, EVENT_ITEMS))


def insert_events(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append ``rows`` (``event_row`` rows) to ``job_events`` in one statement, in their order."""
    if rows:
        statement = _insert_events(dialects.of(conn))
        statement.run(conn, {"items": parameter(EVENT_ITEMS, rows)})
