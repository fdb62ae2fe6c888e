"""SQLite: one writer at a time (``BEGIN IMMEDIATE``), so nothing is locked row by row; the
planner is told which partial index to read; items come from ``json_each``."""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    Connection,
    Integer,
    Select,
    Table,
    Text,
    bindparam,
    column,
    literal_column,
    text,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql import Subquery

from app.queue.sql.dialects import (
    Dialect,
    sqlite_json,  # noqa: F401 (compiles PayloadContains)
)
from app.queue.sql.items import Columns, Kind

_SQL_TYPES = {Kind.BIGINT: BigInteger(), Kind.INTEGER: Integer()}


class SQLiteDialect(Dialect):
    """The embedded dialect."""

    name = "sqlite"
    locks_rows = False
    records_moves = False

    @lru_cache(maxsize=64)  # noqa: B019 (the dialect is a process-wide singleton)
    def items(self, columns: Columns, name: str = "items") -> Subquery:
        listed = ", ".join(f"json_extract(value, '$.{c}') AS {c}" for c, _ in columns)
        sql = f"SELECT {listed}, key AS position FROM json_each(:items)"  # noqa: S608 (ours)
        typed = [column(c, _SQL_TYPES.get(kind, Text())) for c, kind in columns]
        typed.append(column("position", BigInteger()))
        return text(sql).bindparams(bindparam("items")).columns(*typed).subquery(name)

    def item_value(self, items: Subquery, name: str, kind: Kind) -> ColumnElement[Any]:
        return items.c[name]  # the column stores text, as the item carries it

    def skip_locked(self, query: Select[Any]) -> Select[Any]:
        return query

    def locked(self, query: Select[Any]) -> Select[Any]:
        return query

    def head(self, index: str, where: str, order: str, *binds: BindParameter[Any]) -> Any:
        # Named, or the planner would walk the (status, id) index and sort the whole queue.
        sql = f"SELECT id FROM jobs INDEXED BY {index} WHERE {where} ORDER BY {order} LIMIT :limit"  # noqa: S608
        return text(sql).bindparams(*binds, bindparam("limit")).columns(column("id", Integer()))

    def among(self, column: ColumnElement[Any], ids: Select[Any]) -> ColumnElement[bool]:
        return column.in_(ids)  # SQLite reads the ids first and looks each up by its rowid

    def index_hint(self, index: str) -> str:
        return f" INDEXED BY {index}"

    def insert(self, table: Table) -> Any:
        return sqlite.insert(table)

    def lock_keys(self, conn: Connection, keys: Collection[int]) -> None:
        return  # this transaction is already the only writer

    def json_ids_without(self, column: str, ids: str) -> str:
        left = f"SELECT json_group_array(value) FROM json_each({column}) WHERE value NOT IN "  # noqa: S608 (ours)
        return f"NULLIF(({left}(SELECT value FROM json_each(:{ids}))), '[]')"  # noqa: S608

    def led_by_items(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        # A unary + makes the column unusable for an index, so the items lead.
        return literal_column(f"+{column.table.name}.{column.name}")
