"""holders by key: PostgreSQL's statement triggers find a statement's job_holders rows by job id

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

Migration 0011's statement triggers join ``job_holders`` with the statement's jobs. PL/pgSQL
plans those statements once per connection; with job_holders at a few thousand rows the plan
hashed the whole table for each move (a claim or finish of 50 jobs read 10,000 holder rows,
2.5 ms, a quarter of PostgreSQL's time in a bulk run). Here each of those lookups also names the
statement's ids as an array (``job_id = ANY(ARRAY(SELECT id FROM new_rows))``), which the planner
serves from ``ix_job_holders_job_id`` whatever its statistics say, as ``Dialect.among`` does for
the claim. The counts are the same; only the plans change. SQLite's row triggers look up one job
at a time already.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# trigger function -> (the transition table of the statement's jobs, [(a lookup of holders by
# job id as 0011 writes it, how many times it does)])
_BY_KEY = {
    "jobs_counts_updated": (
        "new_rows",
        [
            ("JOIN job_holders h ON h.job_id = m.id", 2),
            ("WHERE h.worker = m.worker_id AND h.job_id = m.id", 1),
            ("WHERE h.job_id = c.id", 1),
        ],
    ),
    "jobs_counts_deleted": (
        "old_rows",
        [("JOIN job_holders h ON h.job_id = o.id", 1), ("WHERE h.job_id = o.id", 1)],
    ),
}


def _migration_0011() -> Any:
    path = Path(__file__).with_name("0011_statement_counters.py")
    spec = importlib.util.spec_from_file_location("queuelog_migration_0011", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _by_key(statement: str, rows: str, lookups: list[tuple[str, int]]) -> str:
    keyed = f"h.job_id = ANY(ARRAY(SELECT id FROM {rows}))"  # noqa: S608 (a transition table)
    for lookup, _ in lookups:
        statement = statement.replace(lookup, f"{lookup} AND {keyed}")
    return statement


def _replace_functions(keyed: bool) -> None:
    """On PostgreSQL, (re)create the trigger functions of 0011 whose statements look holders
    up: with those lookups by key (``keyed``), or as 0011 wrote them."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for name, _, _, _, statements in _migration_0011().TRIGGERS:
        if name not in _BY_KEY:
            continue
        rows, lookups = _BY_KEY[name]
        body = statements()
        text = "".join(body)
        for lookup, times in lookups:
            assert text.count(lookup) == times, (name, lookup)  # 0011 is history: it holds
        if keyed:
            body = [_by_key(s, rows, lookups) for s in body]
        lines = "".join(f"    {s};\n" for s in body)
        bind.exec_driver_sql(
            f"CREATE OR REPLACE FUNCTION queuelog_{name}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$\nBEGIN\n{lines}    RETURN NULL;\nEND\n$$"
        )


def upgrade() -> None:
    _replace_functions(keyed=True)


def downgrade() -> None:
    _replace_functions(keyed=False)
