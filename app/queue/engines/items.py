"""A batch's per-item values as one JSON parameter, read as rows by each engine (``Engine.items``),
so a statement that moves or records N jobs is the same statement, sent once, whatever N is."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from app.sqltypes import sqlite_timestamp


class Kind(StrEnum):
    """How an item's value travels and what SQL type it has once read."""

    BIGINT = "bigint"
    INTEGER = "integer"
    TEXT = "text"
    TIMESTAMP = "timestamp"  # the stored text on SQLite, ``timestamp`` on PostgreSQL
    JSON = "json"  # the document's text; ``jsonb`` on PostgreSQL once cast

    def carried(self, value: Any) -> Any:
        """The value as the JSON parameter carries it."""
        if self is Kind.TIMESTAMP:
            return sqlite_timestamp(value)
        if self is Kind.JSON:
            return json.dumps(value)
        return value


Columns = tuple[tuple[str, Kind], ...]


def parameter(columns: Columns, rows: Sequence[Mapping[str, Any]]) -> str:
    """The ``:items`` parameter for ``rows`` (each a mapping with every column)."""
    return json.dumps([{c: kind.carried(row[c]) for c, kind in columns} for row in rows])
