"""The PostgreSQL tests' databases are reused (``tests.pg_databases``): one given back after a
test is, for the next test, what a fresh clone of the template is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.exc import OperationalError

from app import create_app
from app.infra import db
from tests.builders import make_api
from tests.conftest import base_config
from tests.pg_databases import Databases

pytestmark = pytest.mark.pg

_ROWS = text(
    "SELECT relname, (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I',"
    " relname), false, true, '')))[1]::text::int FROM pg_class"
    " WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' ORDER BY relname"
)


@pytest.fixture
def databases(postgres_server_url: str, postgres_template: str) -> Iterator[Databases]:
    """A pool of this test's own, so that what it takes and gives back is not another test's."""
    pool = Databases(postgres_server_url, postgres_template)
    yield pool
    pool.close()


def _state(url: str) -> tuple[list[tuple[str, int]], tuple[int, bool]]:
    """Rows per table and where the job ids stand."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return _rows(conn), _next_job_id(conn)
    finally:
        engine.dispose()


def _rows(conn: Connection) -> list[tuple[str, int]]:
    return [(str(name), int(count)) for name, count in conn.execute(_ROWS)]


def _next_job_id(conn: Connection) -> tuple[int, bool]:
    return tuple(conn.execute(text("SELECT last_value, is_called FROM jobs_id_seq")).one())  # type: ignore[return-value]


def test_a_database_given_back_is_for_the_next_test_what_a_fresh_clone_is(
    databases: Databases, postgres_server_url: str
) -> None:
    used = databases.take()
    fresh = databases.take()  # none is ready: a second clone
    assert fresh != used
    url = f"{postgres_server_url}/{used}"
    app = create_app(base_config(url))
    producer = make_api(app, app.test_client(), "producer", "producer")
    assert [producer.enqueue()["id"] for _ in range(3)] == [1, 2, 3]
    db.close(app)
    forgotten = create_engine(url)
    lingering = forgotten.connect()
    databases.give_back(used)
    with pytest.raises(OperationalError):  # ended, with the test's other connections
        lingering.execute(text("SELECT 1"))
    forgotten.dispose()
    assert databases.take() == used
    assert _state(url) == _state(f"{postgres_server_url}/{fresh}")
    app = create_app(base_config(url))
    try:
        assert make_api(app, app.test_client(), "producer", "producer").enqueue()["id"] == 1
    finally:
        db.close(app)


def test_a_database_whose_schema_a_test_changed_is_dropped(
    databases: Databases, postgres_server_url: str
) -> None:
    name = databases.take()
    engine = create_engine(f"{postgres_server_url}/{name}")
    with engine.begin() as conn:
        conn.execute(text("CREATE INDEX ix_a_test_added ON jobs (priority)"))
    engine.dispose()
    databases.give_back(name)
    assert databases.take() != name
