"""The queue's SQL: one module of statements per aggregate, written once over the
``dialects`` (what SQLite and PostgreSQL do differently)."""
