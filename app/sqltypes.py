"""Column types and the index helper the tables share (``app.schema``) and the migrations use:
timestamps that are aware UTC in Python on both engines, JSON that is JSONB on PostgreSQL,
64-bit ids, partial indexes declared once for both engines."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Index, Integer, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect


class UTCDateTime(TypeDecorator[datetime]):
    """Stores naive UTC, hands back aware UTC, so comparisons are plain on both backends."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous: pass an aware UTC datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]


JSONDocument = JSON().with_variant(JSONB(), "postgresql")
# 64-bit ids (a busy queue outgrows 2**31); SQLite needs plain INTEGER for its rowid alias.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def partial_index(name: str, *columns: Any, where: Any) -> Index:
    """An index of the rows matching ``where`` only, on both engines."""
    return Index(name, *columns, sqlite_where=where, postgresql_where=where)
