"""The Alembic migrations build exactly the tables of ``app.storage.schema``, and re-running is
harmless."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask import Flask
from sqlalchemy import create_engine, inspect, text

import app.storage.schema_figures
import app.storage.schema_logs
import app.storage.schema_partitions
import app.storage.schema_types  # noqa: F401 (its tables are on the same metadata)
from app import create_app
from app.infra import db
from app.storage import migrate
from app.storage.schema import created_on, metadata
from tests.conftest import base_config

SINCE = "0019"  # the newest migrations, from this one on, are taken down and up again
FUNCTION = {"f": "queuelog_jobs_counts_updated"}


@pytest.fixture
def empty_app(tmp_path: Path) -> Iterator[Flask]:
    """An app on a SQLite file that does not exist yet."""
    path = tmp_path / "fresh.sqlite3"
    assert not path.exists()
    app = create_app(base_config(f"sqlite:///{path}"))
    yield app
    db.engine(app).dispose()


def _differences(app: Flask) -> list[object]:
    with db.engine(app).connect() as conn:

        def here(item: object, name: str, kind: str, reflected: bool, other: object) -> bool:
            return reflected or created_on(item, conn.dialect.name)

        opts = {"compare_type": True, "compare_server_default": True, "include_object": here}
        context = MigrationContext.configure(conn, opts=opts)
        return list(compare_metadata(context, metadata))


def _head() -> str:
    head = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
    assert head is not None
    return head


def test_migrations_match_the_schema(empty_app: Flask) -> None:
    migrate.upgrade(db.engine(empty_app))
    assert _differences(empty_app) == []


@pytest.mark.pg
def test_migrations_match_the_schema_on_postgresql(postgres_server_url: str) -> None:
    engine = create_engine(f"{postgres_server_url}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("CREATE DATABASE migration_check"))
    engine.dispose()
    app = create_app(base_config(f"{postgres_server_url}/migration_check"))
    migrate.upgrade(db.engine(app))
    migrate.upgrade(db.engine(app))  # a second run is a no-op
    assert _differences(app) == []
    db.engine(app).dispose()


def _downgrade(app: Flask, revision: str) -> None:
    config = migrate.alembic_config()
    with db.engine(app).begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, revision)


def test_the_newest_migrations_go_down_and_up_again(empty_app: Flask) -> None:
    migrate.upgrade(db.engine(empty_app))
    _downgrade(empty_app, SINCE)
    migrate.upgrade(db.engine(empty_app))
    assert _differences(empty_app) == []


@pytest.mark.pg
def test_the_newest_migrations_go_down_and_up_again_on_postgresql(
    postgres_server_url: str,
) -> None:
    engine = create_engine(f"{postgres_server_url}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("CREATE DATABASE migration_round_trip"))
    engine.dispose()
    app = create_app(base_config(f"{postgres_server_url}/migration_round_trip"))

    def newest() -> tuple[bool, bool]:
        """Whether the counters' triggers skip a counted move (0020), whether an event's job is
        a foreign key (not since 0022)."""
        with db.engine(app).connect() as conn:
            body = conn.execute(text("SELECT prosrc FROM pg_proc WHERE proname = :f"), FUNCTION)
            keys = inspect(conn).get_foreign_keys("job_events")
            return "queuelog.jobs_counted" in body.scalar_one(), bool(keys)

    migrate.upgrade(db.engine(app))
    _downgrade(app, SINCE)
    assert newest() == (False, True)
    migrate.upgrade(db.engine(app))
    assert newest() == (True, False)
    assert _differences(app) == []
    db.engine(app).dispose()


def test_migrated_database_has_every_table_index_and_check(empty_app: Flask) -> None:
    migrate.upgrade(db.engine(empty_app))
    inspector = inspect(db.engine(empty_app))
    assert set(inspector.get_table_names()) >= {"jobs", "job_events", "users", "api_tokens"}
    indexes = {ix["name"] for ix in inspector.get_indexes("jobs")}
    assert {"ix_jobs_claim", "ix_jobs_status_id", "ix_jobs_owner_id"} <= indexes
    checks = {ck["name"] for ck in inspector.get_check_constraints("jobs")}
    assert "ck_jobs_status" in checks
    with db.engine(empty_app).connect() as conn:
        plan = " ".join(
            str(row[-1])
            for row in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN SELECT id FROM jobs INDEXED BY ix_jobs_claim "
                "WHERE status = 'pending' AND waiting_for IS NULL AND run_at <= ? "
                "ORDER BY priority DESC, run_at, id LIMIT 1",
                ("2030-01-01 00:00:00",),
            )
        )
    assert "ix_jobs_claim" in plan and "TEMP B-TREE" not in plan


def test_the_status_check_refuses_impossible_states(empty_app: Flask) -> None:
    migrate.upgrade(db.engine(empty_app))
    with db.engine(empty_app).connect() as conn:
        conn.exec_driver_sql(
            "INSERT INTO users (name, role, session_nonce, created_at) "
            "VALUES ('u', 'producer', 'n', '2030-01-01 00:00:00')"
        )
        with pytest.raises(Exception, match="CHECK constraint failed"):
            conn.exec_driver_sql(
                "INSERT INTO jobs (type, payload, status, created_by, run_at, created_at, "
                "updated_at) VALUES ('t', '{}', 'exploded', 1, '2030-01-01', '2030-01-01', "
                "'2030-01-01')"
            )
        conn.rollback()


def test_upgrade_is_idempotent(empty_app: Flask) -> None:
    migrate.upgrade(db.engine(empty_app))
    with db.engine(empty_app).begin() as conn:
        conn.execute(
            text(
                "INSERT INTO users (name, role, session_nonce, created_at) "
                "VALUES ('keep', 'admin', 'n', '2030-01-01 00:00:00')"
            )
        )
    migrate.upgrade(db.engine(empty_app))
    migrate.upgrade(db.engine(empty_app))
    assert _differences(empty_app) == []
    with db.engine(empty_app).connect() as conn:
        assert conn.execute(text("SELECT name FROM users")).scalars().all() == ["keep"]
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [
            _head()
        ]


def test_flask_db_upgrade_on_an_empty_file(empty_app: Flask) -> None:
    runner = empty_app.test_cli_runner()
    for _ in range(2):
        result = runner.invoke(args=["db", "upgrade"])
        assert result.exit_code == 0, result.output
    assert _differences(empty_app) == []


def test_a_single_head_which_readiness_knows(empty_app: Flask) -> None:
    heads = ScriptDirectory.from_config(migrate.alembic_config()).get_heads()
    assert heads == [migrate.HEAD], "set app.storage.migrate.HEAD to the newest migration"
