"""Rows written from a batch's items (``engines.items``): the jobs of an enqueue and the events
of any batch, each in one statement whatever the batch size, in the items' order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Insert, Table, insert, select

from app.queue import engines
from app.queue.engines import Engine
from app.queue.engines.items import Columns, Kind, parameter
from app.queue.engines.prepared import Prepared
from app.schema import job_events


def insert_rows(engine: Engine, table: Table, columns: Columns) -> Insert:
    """The INSERT of the items' rows into ``table`` (columns named alike), in the items' order."""
    items = engine.items(columns)
    values = [engine.item_value(items, name, kind) for name, kind in columns]
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
def _insert_events(engine: Engine) -> Prepared:
    return Prepared(insert_rows(engine, job_events, EVENT_ITEMS))


def insert_events(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append ``rows`` (``event_row`` rows) to ``job_events`` in one statement, in their order."""
    if rows:
        statement = _insert_events(engines.of(conn))
        statement.run(conn, {"items": parameter(EVENT_ITEMS, rows)})
