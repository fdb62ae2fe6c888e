"""A batch's per-item values as one JSON parameter, read as rows by each dialect
(``Dialect.items``), so a statement that moves or records N jobs is the same statement, sent once,
whatever N is.

The parameter is written by orjson (the standard encoder took a tenth of a job's server time);
what orjson refuses (an integer beyond 64 bits, text that is not valid Unicode) goes to the
standard encoder, which stores the same values."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import orjson

from app.storage.sqltypes import sqlite_timestamp


class Kind(StrEnum):
    """How an item's value travels and what SQL type it has once read."""

    BIGINT = "bigint"
    INTEGER = "integer"
    TEXT = "text"
    TIMESTAMP = "timestamp"  # the stored text on SQLite, ``timestamp`` on PostgreSQL
    JSON = "json"  # the document's text; ``jsonb`` on PostgreSQL once cast


Columns = tuple[tuple[str, Kind], ...]


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError: a big integer or a lone surrogate
        return json.dumps(value)


def parameter(columns: Columns, rows: Sequence[Mapping[str, Any]]) -> str:
    """The ``:items`` parameter for ``rows`` (each a mapping with every column). A batch's rows
    mostly share their timestamps (the request's instant): each distinct one is written once."""
    stamps: dict[Any, str | None] = {}

    def carried(kind: Kind, value: Any) -> Any:
        if kind is Kind.JSON:
            return _dumps(value)
        if kind is Kind.TIMESTAMP:
            if value not in stamps:
                stamps[value] = sqlite_timestamp(value)
            return stamps[value]
        return value

    return _dumps([{c: carried(kind, row[c]) for c, kind in columns} for row in rows])
