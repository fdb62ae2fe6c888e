"""Alembic environment: runs on the connection the app hands over (see app/storage/migrate.py)."""

from __future__ import annotations

from alembic import context

import app.storage.schema_figures  # noqa: F401 (its tables are on the same metadata)
from app.storage.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
