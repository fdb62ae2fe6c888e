"""A payload search on a key of PAYLOAD_SEARCH_KEYS starts from the expression index of that key
on both engines, whoever asks and with or without a status filter; the migration step makes and
drops those indexes to match the setting, under names every process agrees on, processes
migrating at once taking turns."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import create_engine, text

from app.infra import db
from app.queue.usecases import listing
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import JobFilters
from app.storage.databases import payload_indexes
from tests.backends import every_backend  # noqa: F401 (both engines)
from tests.builders import make_user
from tests.conftest import TEST_SECRETS_KEY
from tests.queue.sql.test_query_plans import plans, recorded
from tests.test_cli import FLASK, ROOT

KEYS = ["customer", "a.b", "$"]
FILLER = 5_000


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"PAYLOAD_SEARCH_KEYS": KEYS}


def _fill(app: Flask, owner: Actor) -> None:
    """Jobs of many customers, then the statistics that know them."""
    with app.app_context(), db.transaction() as conn:
        payload_indexes.match(conn, KEYS)
        conn.execute(
            text(
                "INSERT INTO jobs (type, payload, priority, max_retries, created_by, run_at, "
                "created_at, updated_at, status) VALUES ('email.send', :payload, 0, 3, :owner, "
                "'2026-01-01 00:00:00', '2026-01-01 00:00:00', '2026-01-01 00:00:00', 'pending')"
            ),
            [
                {
                    "payload": json.dumps({"customer": n, "a.b": n % 1000, "$": f"x{n % 1000}"}),
                    "owner": owner.id,
                }
                for n in range(FILLER)
            ],
        )
    with app.app_context(), db.engine(app).connect() as conn:
        conn.execute(text("ANALYZE"))
        conn.commit()


def _index_names(node: dict[str, Any]) -> Iterator[str]:
    if "Index Name" in node:
        yield node["Index Name"]
    for child in node.get("Plans", []):
        yield from _index_names(child)


def _indexes_read(app: Flask, statements: list[tuple[str, Any]]) -> set[str]:
    """The indexes the payload search's statement reads, as the engine plans it."""
    (sql, params) = [(s, p) for s, p in statements if "payload" in s and "LIMIT" in s][-1]
    if db.engine(app).dialect.name == "sqlite":
        return {word for line in plans(app, [(sql, params)]) for word in line.split()}
    raw = db.engine(app).raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (plan,) = cursor.fetchone()
        return set(_index_names((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]))
    finally:
        raw.rollback()
        raw.close()


def test_a_search_on_a_configured_key_reads_its_index(
    app: Flask, backend: str, subtests: pytest.Subtests
) -> None:
    """Every key, asked by an admin and by the jobs' producer, with and without a status
    filter, on one database filled once (the 5,000 jobs and their statistics cost most)."""
    owner = make_user(app, "search-producer", "producer").actor()
    admin = make_user(app, "search-admin", "admin").actor()
    _fill(app, owner)
    for key, who, status in itertools.product(KEYS, ["admin", "producer"], [None, "pending"]):
        with subtests.test(key=key, who=who, status=status):
            needle = {"customer": 4_321} if key == "customer" else {key: {"a.b": 3, "$": "x3"}[key]}
            filters = JobFilters(status=status, payload=json.dumps(needle), limit=5)
            with app.app_context(), recorded(app) as statements, db.read() as conn:
                found = listing.page(conn, admin if who == "admin" else owner, filters)
            assert len(found.jobs) == (1 if key == "customer" else 5)
            assert payload_indexes.index_name(key) in _indexes_read(app, statements)


def test_the_migration_step_makes_the_indexes_the_setting_names(app: Flask, backend: str) -> None:
    with app.app_context(), db.transaction() as conn:
        created, dropped = payload_indexes.match(conn, ["customer", "region"])
        assert (created, dropped) == (
            sorted(payload_indexes.index_name(k) for k in ["customer", "region"]),
            [],
        )
        assert payload_indexes.match(conn, ["customer", "region"]) == ([], [])
        created, dropped = payload_indexes.match(conn, ["customer", "order"])
        assert created == [payload_indexes.index_name("order")]
        assert dropped == [payload_indexes.index_name("region")]
        listed = (
            "SELECT name FROM sqlite_master WHERE type = 'index'"
            if backend == "sqlite"
            else "SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'"
        )
        names = {
            row[0]
            for row in conn.execute(text(listed))
            if row[0].startswith(payload_indexes.PREFIX)
        }
    assert names == {payload_indexes.index_name(k) for k in ["customer", "order"]}


def test_index_names_are_the_keys_own() -> None:
    names = {payload_indexes.index_name(k) for k in ["customer", "Customer", "a.b", "a_b", "$"]}
    assert len(names) == 5
    assert payload_indexes.index_name("a.b") == payload_indexes.index_name("a.b")
    assert all(name.isidentifier() and len(name) < 64 for name in names)


def test_processes_migrating_at_once_agree(tmp_path: Path) -> None:
    """Four ``flask db upgrade`` processes at once on a new database: each takes its turn, none
    fails, and the setting's indexes exist once each."""
    database = tmp_path / "raced.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_") and k != "PYTHONPATH"}
    env |= {
        "FLASK_DATABASE_URL": f"sqlite:///{database}",
        "FLASK_SECRET_KEY": "k" + secrets.token_hex(24),
        "FLASK_SECRETS_KEY": TEST_SECRETS_KEY,
        "FLASK_PAYLOAD_SEARCH_KEYS": json.dumps(KEYS),
    }
    command = [str(FLASK), "--app", "app", "db", "upgrade"]
    runs = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    outcomes = [(run.wait(timeout=120), run.communicate()[1].decode()) for run in runs]
    assert [code for code, _ in outcomes] == [0] * 4, outcomes
    engine = create_engine(f"sqlite:///{database}")
    with engine.connect() as conn:
        names = [row[0] for row in conn.execute(text("SELECT name FROM sqlite_master"))]
    engine.dispose()
    assert sorted(n for n in names if n.startswith(payload_indexes.PREFIX)) == sorted(
        payload_indexes.index_name(k) for k in KEYS
    )
