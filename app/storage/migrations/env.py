"""Alembic environment: runs on the connection the app hands over (see app/storage/migrate.py)."""

from __future__ import annotations

from alembic import context
from sqlalchemy.schema import SchemaItem

import app.storage.schema_figures
import app.storage.schema_logs
import app.storage.schema_partitions
import app.storage.schema_types  # noqa: F401 (its tables are on the same metadata)
from app.storage.schema import created_on, metadata

connection = context.config.attributes["connection"]


def include_object(
    item: SchemaItem, name: str | None, kind: str, reflected: bool, compare_to: SchemaItem | None
) -> bool:
    """Compare only what exists on this engine (a constraint may be made for one alone)."""
    return reflected or created_on(item, connection.dialect.name)


context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    include_object=include_object,
)
with context.begin_transaction():
    context.run_migrations()
