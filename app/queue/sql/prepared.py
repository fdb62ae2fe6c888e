"""Hot statements, defined with SQLAlchemy Core and compiled once per dialect, run on the driver's
cursor: each execute skips SQLAlchemy's per-call cache key, execution context and result rows.

A ``Prepared`` statement takes its parameters by bind name, converts them with the bind
processors of their types and the rows with the result processors of the selected columns, exactly
as ``Connection.execute`` would. It runs through ``Connection._cursor_execute`` (SQLAlchemy's own
single-statement path, pinned with the SQLAlchemy version): cursor events still fire, so recorded
SQL and query plans see these statements, and driver errors arrive as SQLAlchemy's exceptions.
That private hook is fenced here, with the dialects: no other module touches SQLAlchemy's
internals, and a SQLAlchemy upgrade is checked by this module's tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect as SQLAlchemyDialect
from sqlalchemy.sql.elements import ClauseElement

Row = tuple[Any, ...]
Processor = Callable[[Any], Any]


@dataclass(frozen=True)
class _Compiled:
    """One statement as one dialect runs it."""

    sql: str
    positional: bool
    slots: tuple[tuple[str, Processor | None], ...]  # bind name and processor, in SQL order
    defaults: Mapping[str, Any]  # values bound in the statement itself (literals)
    columns: tuple[tuple[int, Processor], ...]  # result columns that need converting

    def parameters(self, params: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
        """The driver's parameters for ``params`` (by bind name)."""
        values = {**self.defaults, **params} if self.defaults else params
        if self.positional:
            return [values[n] if p is None else p(values[n]) for n, p in self.slots]
        return {n: values[n] if p is None else p(values[n]) for n, p in self.slots}

    def convert(self, rows: list[Row]) -> list[Row]:
        """Driver rows as SQLAlchemy would hand them out."""
        if not self.columns:
            return rows
        converted = []
        for row in rows:
            values = list(row)
            for index, processor in self.columns:
                values[index] = processor(values[index])
            converted.append(tuple(values))
        return converted


def _compile(statement: ClauseElement, dialect: SQLAlchemyDialect) -> _Compiled:
    compiled: Any = statement.compile(dialect=dialect)
    binds = compiled.binds
    if compiled.escaped_bind_names or any(bind.expanding for bind in binds.values()):
        raise ValueError("prepared statements take plain bind names, one value each")
    names = compiled.positiontup if compiled.positional else list(binds)
    slots = tuple(
        (name, binds[name].type.dialect_impl(dialect).bind_processor(dialect)) for name in names
    )
    defaults = {name: bind.value for name, bind in binds.items() if not bind.required}
    selected = getattr(statement, "exported_columns", ())
    processors = (c.type.dialect_impl(dialect).result_processor(dialect, None) for c in selected)
    columns = tuple((i, p) for i, p in enumerate(processors) if p is not None)
    return _Compiled(compiled.string, compiled.positional, slots, defaults, columns)


class Prepared:
    """A Core statement compiled once per dialect and run on the driver's cursor."""

    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        self._by_dialect: dict[tuple[type[SQLAlchemyDialect], str], _Compiled] = {}

    def compiled(self, dialect: SQLAlchemyDialect) -> _Compiled:
        """The statement as ``dialect`` runs it (compiled on first use)."""
        key = (type(dialect), dialect.paramstyle)
        found = self._by_dialect.get(key)
        if found is None:
            found = self._by_dialect[key] = _compile(self.statement, dialect)
        return found

    def _cursor(self, conn: Connection, params: Mapping[str, Any]) -> tuple[Any, _Compiled]:
        if not conn.in_transaction():  # as Connection.execute would: begin first
            conn.begin()
        compiled = self.compiled(conn.dialect)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        conn._cursor_execute(cursor, compiled.sql, compiled.parameters(params))
        return cursor, compiled

    def rows(self, conn: Connection, params: Mapping[str, Any] | None = None) -> list[Row]:
        """Every row the statement returns."""
        cursor, compiled = self._cursor(conn, params or {})
        try:
            return compiled.convert(cursor.fetchall())
        finally:
            cursor.close()

    def row(self, conn: Connection, params: Mapping[str, Any] | None = None) -> Row | None:
        """The first row, or None."""
        found = self.rows(conn, params)
        return found[0] if found else None

    def run(self, conn: Connection, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement that returns no rows; how many rows it changed."""
        cursor, _ = self._cursor(conn, params or {})
        try:
            return int(cursor.rowcount)
        finally:
            cursor.close()
