"""Column types and the index helper the tables share (``app.storage.schema``) and the migrations
use: timestamps that are aware UTC in Python on both engines, JSON that is JSONB on PostgreSQL,
64-bit ids, partial indexes declared once for both engines."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, DateTime, Index, Integer, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect


class UTCDateTime(TypeDecorator[datetime]):
    """Stores naive UTC, hands back aware UTC, so comparisons are plain on both backends.

    On SQLite the column is text in SQLAlchemy's own DATETIME format ("2026-01-31 12:00:00.000000",
    which sorts as it compares). A job row carries six of these, so SQLite gets one C call each
    way (``isoformat``, ``fromisoformat``) instead of SQLAlchemy's formatting and regex parse
    chained behind this decorator; the text stored is the same.
    """

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else _naive_utc(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)
        return sqlite_timestamp

    def result_processor(self, dialect: Dialect, coltype: Any) -> Callable[[Any], Any] | None:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)
        return _sqlite_datetime


def _naive_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous: pass an aware UTC datetime")
    return value.astimezone(UTC).replace(tzinfo=None)


def sqlite_timestamp(value: datetime | None) -> str | None:
    """An aware datetime as SQLite stores it: naive UTC text with microseconds."""
    return None if value is None else _naive_utc(value).isoformat(" ", "microseconds")


def _sqlite_datetime(value: str | None) -> datetime | None:
    """SQLite's text (with or without microseconds, or a date alone) as an aware UTC datetime.
    A time of day is parsed with its offset: ``replace(tzinfo=...)`` after the parse would
    take five times as long, six times per job row."""
    if value is None:
        return None
    if len(value) > len("YYYY-MM-DD"):
        return datetime.fromisoformat(value + "+00:00")
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


JSONDocument = JSON().with_variant(JSONB(), "postgresql")
# The same, but Python's None is SQL NULL (not JSON null): for a column whose NULL means
# something, e.g. ``jobs.waiting_for`` (nothing awaited).
NullableDocument = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
# 64-bit ids (a busy queue outgrows 2**31); SQLite needs plain INTEGER for its rowid alias.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def partial_index(name: str, *columns: Any, where: Any, unique: bool = False) -> Index:
    """An index of the rows matching ``where`` only, on both engines (``unique``: no two of
    those rows share its columns' values)."""
    return Index(name, *columns, unique=unique, sqlite_where=where, postgresql_where=where)


def one_of(column: str, values: Iterable[object], name: str) -> CheckConstraint:
    """A CHECK that ``column`` holds one of ``values``, built from the enum or table that
    defines them, so the database and the code cannot disagree on the list."""
    listed = ", ".join(repr(str(v)) if isinstance(v, str) else str(v) for v in values)
    return CheckConstraint(f"{column} IN ({listed})", name=name)
