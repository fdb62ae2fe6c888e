"""SQLite's payload containment (``PayloadContains``): SQLite has no ``@>``, so the needle
becomes SQL: every key looked up with ``json_each`` (whose keys and strings arrive decoded, so
any key works: dots, quotes, ``$``, escapes), each value compared with its JSON type, objects
recursively, each element of an array found among the document's. In front of that exact check,
a prefilter ``json_extract(payload, '$."key"') = value`` per top-level string or number: the
expression of ``app.storage.databases.payload_indexes``, so the indexes of PAYLOAD_SEARCH_KEYS
serve it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, literal_column
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from app.queue.sql.payload_search import PayloadContains
from app.storage.databases.payload_indexes import path_literal, path_safe

_NUMBERS: tuple[ColumnElement[str], ...] = (
    literal_column("'integer'"),
    literal_column("'real'"),
)
_CONSTANTS = {None: "'null'", True: "'true'", False: "'false'"}  # json_each's type names


def extracted(document: ColumnElement[Any], key: str) -> ColumnElement[Any]:
    """``json_extract(document, '$."key"')``: the expression an index of ``key`` keeps."""
    return func.json_extract(document, literal_column(path_literal(key)))


@compiles(PayloadContains, "sqlite")
def _compile(element: PayloadContains, compiler: SQLCompiler, **kw: Any) -> str:
    needle = element.needle_object
    aliases = (f"payload_{n}" for n in itertools.count())
    prefilter = [
        extracted(element.document, key) == value
        for key, value in needle.items()
        if path_safe(key) and isinstance(value, str | int | float) and not isinstance(value, bool)
    ]
    return compiler.process(and_(*prefilter, _object(element.document, needle, aliases)), **kw)


def _object(
    document: ColumnElement[Any], needle: dict[str, Any], aliases: Iterator[str]
) -> ColumnElement[bool]:
    """Every key of ``needle`` is in the object ``document`` with a value that contains its."""
    found = []
    for key, value in needle.items():
        member = func.json_each(document).table_valued("key", "value", "type").alias(next(aliases))
        found.append(exists().where(member.c.key == key, *_value(member, value, aliases)))
    return and_(True, *found)


def _value(member: Any, value: Any, aliases: Iterator[str]) -> list[ColumnElement[bool]]:
    """Conditions on a ``json_each`` row ``member``: its value contains ``value``."""
    kind = member.c.type
    if value is None or isinstance(value, bool):
        return [kind == literal_column(_CONSTANTS[value])]
    if isinstance(value, str):
        return [kind == literal_column("'text'"), member.c.value == value]
    if isinstance(value, int | float):
        return [kind.in_(_NUMBERS), member.c.value == value]
    if isinstance(value, dict):
        return [kind == literal_column("'object'"), _object(member.c.value, value, aliases)]
    elements = []
    for wanted in value:
        element = func.json_each(member.c.value).table_valued("value", "type").alias(next(aliases))
        elements.append(exists().where(*_value(element, wanted, aliases)))
    return [kind == literal_column("'array'"), *elements]
