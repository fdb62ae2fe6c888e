"""A batch's per-item values as one relation read from one JSON parameter, so a statement that
moves or records N jobs is the same statement, sent once, whatever N is (compiled once too).

SQLite reads the rows with ``json_each``, PostgreSQL with ``json_to_recordset``; each value is
sent as the column's database text (a timestamp as stored, a JSON document as its text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Insert,
    Integer,
    Table,
    Text,
    bindparam,
    column,
    insert,
    select,
    text,
)
from sqlalchemy.sql import Subquery

from app.prepared import Prepared
from app.schema import job_events
from app.sqltypes import sqlite_timestamp


class Kind(StrEnum):
    """How an item's value travels and what SQL type it has once read."""

    BIGINT = "bigint"
    INTEGER = "integer"
    TEXT = "text"
    TIMESTAMP = "timestamp"  # stored text on SQLite, ``timestamp`` on PostgreSQL
    JSON = "json"  # the document's text; ``jsonb`` on PostgreSQL once cast

    def carried(self, value: Any) -> Any:
        """The value as the JSON parameter carries it."""
        if self is Kind.TIMESTAMP:
            return sqlite_timestamp(value)
        if self is Kind.JSON:
            return json.dumps(value)
        return value


_SQL_TYPES = {Kind.BIGINT: BigInteger(), Kind.INTEGER: Integer()}
Columns = tuple[tuple[str, Kind], ...]


@lru_cache(maxsize=64)
def relation(backend: str, columns: Columns, name: str = "items") -> Subquery:
    """The rows of the ``:items`` parameter with ``columns`` and their ``position`` in the list
    (from 0 or 1: only their order counts), as a subquery called ``name``."""
    if backend == "sqlite":
        listed = ", ".join(f"json_extract(value, '$.{c}') AS {c}" for c, _ in columns)
        sql = f"SELECT {listed}, key AS position FROM json_each(:items)"  # noqa: S608 (ours)
    else:
        declared = ", ".join(
            f"{c} {'text' if kind is Kind.JSON else kind.value}" for c, kind in columns
        )
        names = ", ".join(c for c, _ in columns)
        recordset = (
            f"ROWS FROM (json_to_recordset(CAST(:items AS json)) AS ({declared})) "
            f"WITH ORDINALITY AS rows({names}, position)"
        )
        sql = f"SELECT {names}, position FROM {recordset}"  # noqa: S608 (column names are ours)
    typed = [column(c, _SQL_TYPES.get(kind, Text())) for c, kind in columns]
    typed.append(column("position", BigInteger()))
    return text(sql).bindparams(bindparam("items")).columns(*typed).subquery(name)


def value(backend: str, items: Subquery, name: str, kind: Kind) -> ColumnElement[Any]:
    """Item column ``name`` as the value of a job column (a JSON document cast on PostgreSQL)."""
    if kind is Kind.JSON and backend != "sqlite":
        return text(f"CAST({items.name}.{name} AS jsonb)")  # type: ignore[return-value]
    return items.c[name]


def parameter(columns: Columns, rows: Sequence[Mapping[str, Any]]) -> str:
    """The ``:items`` parameter for ``rows`` (each a mapping with every column)."""
    return json.dumps([{c: kind.carried(row[c]) for c, kind in columns} for row in rows])


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


def insert_rows(backend: str, table: Table, columns: Columns) -> Insert:
    """The INSERT of the items' rows into ``table`` (columns named alike), in the items' order."""
    items = relation(backend, columns)
    values = [value(backend, items, name, kind) for name, kind in columns]
    rows = select(*values).order_by(items.c.position)
    return insert(table).from_select([name for name, _ in columns], rows)


@lru_cache(maxsize=4)
def _insert_events(backend: str) -> Prepared:
    return Prepared(insert_rows(backend, job_events, EVENT_ITEMS))


def insert_events(conn: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append ``rows`` (``event_row`` rows) to ``job_events`` in one statement, in their order."""
    if rows:
        statement = _insert_events(conn.dialect.name)
        statement.run(conn, {"items": parameter(EVENT_ITEMS, rows)})
