"""The queue's SQL. The modules of this package hold the statements (jobs, batches, moves,
counts, flow, schedules, ...); what they do differently on SQLite and on PostgreSQL sits
behind one interface (River's driver, Oban's engines), ``Dialect``, implemented in ``sqlite``
and ``postgresql``. The statements are built through ``of(conn)``; no module outside this
package and the migrations asks which database it runs on.

What differs, in short: PostgreSQL runs many writers at once, so claims and sweeps lock the
rows they take (``FOR UPDATE SKIP LOCKED``) and uniqueness takes advisory locks, while SQLite
has one writer at a time and needs neither; SQLite's planner is told which partial index to
read; a batch's per-item values are read from one JSON parameter by each dialect's own function.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Any

import sqlalchemy
from sqlalchemy import BindParameter, ColumnElement, Connection, Select, Table
from sqlalchemy.sql import Subquery

from app.queue.sql.items import Columns, Kind


class Dialect(ABC):
    """One database's way of running the queue's statements. Instances are stateless and
    hashable: statement builders cache what they build per dialect."""

    name: str  # the name of the SQLAlchemy dialect it serves
    locks_rows: bool  # whether concurrent writers exist, so rows taken must be locked
    # whether the hot moves write their events and figures themselves (``recorded``), rather
    # than an UPDATE, then an INSERT of the events, counted by the database's row triggers
    records_moves: bool

    @abstractmethod
    def items(self, columns: Columns, name: str = "items") -> Subquery:
        """The rows of the ``:items`` JSON parameter (a list of objects) with ``columns`` and
        their ``position`` (index) in the list, as a subquery called ``name``."""

    @abstractmethod
    def item_value(self, items: Subquery, name: str, kind: Kind) -> ColumnElement[Any]:
        """Item column ``name`` as the value of a table column (JSON documents typed)."""

    @abstractmethod
    def skip_locked(self, query: Select[Any]) -> Select[Any]:
        """``query`` taking only rows no other transaction holds, and locking them."""

    @abstractmethod
    def locked(self, query: Select[Any]) -> Select[Any]:
        """``query`` locking its rows, waiting for their holders."""

    @abstractmethod
    def head(self, index: str, where: str, order: str, *binds: BindParameter[Any]) -> Any:
        """The ids of the first ``:limit`` jobs matching ``where`` in ``order`` (module
        constants; ``index`` is the partial index that serves them), for an UPDATE to take:
        jobs another transaction holds are skipped, and the LIMIT runs once."""

    @abstractmethod
    def among(self, column: ColumnElement[Any], ids: Select[Any]) -> ColumnElement[bool]:
        """``column IN ids`` (the ids of a claim's ``head`` or of a batch's items), written so
        the statement reads ``ids`` first and finds each row by its key, whatever the planner's
        statistics say of the table: a statement about those jobs must not start from another
        index, nor scan the table while its statistics still describe it empty."""

    @abstractmethod
    def index_hint(self, index: str) -> str:
        """Text after a table name that tells the planner to read ``index`` ('' if unneeded)."""

    @abstractmethod
    def insert(self, table: Table) -> Any:
        """An INSERT that knows ``ON CONFLICT`` (the dialect's own construct)."""

    @abstractmethod
    def lock_keys(self, conn: Connection, keys: Collection[int]) -> None:
        """Hold transaction-level locks on ``keys`` (in order) until the transaction ends."""

    @abstractmethod
    def json_ids_without(self, column: str, ids: str) -> str:
        """SQL for the JSON list of ids in ``column`` without those of the JSON list parameter
        ``ids`` (its name); NULL when none is left."""

    @abstractmethod
    def led_by_items(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        """``column`` as a condition of a statement joined with items, written so the items
        lead the join and each finds its row by id (SQLite would otherwise walk the column's
        index and scan the items for each row)."""


def of(bind: Connection | sqlalchemy.Engine) -> Dialect:
    """The dialect of the database ``bind`` (a connection or SQLAlchemy's engine) talks to."""
    return DIALECTS[bind.dialect.name]


def _dialects() -> dict[str, Dialect]:
    from app.queue.sql.dialects.postgresql import PostgreSQLDialect
    from app.queue.sql.dialects.sqlite import SQLiteDialect

    return {dialect.name: dialect for dialect in (SQLiteDialect(), PostgreSQLDialect())}


DIALECTS = _dialects()
