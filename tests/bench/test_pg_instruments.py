"""The bench's PostgreSQL instruments on a real server: pg_stat_statements' time per job of one
database, the bench's own statements left out, and the statements of one call counted in the
server's log, as PostgreSQL writes it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

from bench import pg_time
from bench.pg_requests import Log
from bench.pg_statements import log_statements
from devservers.postgres import bin_dir, create_database, postgres_server

pytestmark = pytest.mark.pg


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A server of its own, started with the bench's settings (the session's has none)."""
    if bin_dir() is None:
        if os.environ.get("QUEUELOG_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL server binaries not found (apt-get install postgresql)")
        pytest.skip("PostgreSQL server binaries not found; install Debian's postgresql to run")
    with postgres_server(settings=pg_time.SETTINGS) as url:
        yield url.replace("+psycopg", "")


def _admin(server: str) -> str:
    return f"{server}/postgres"


def test_time_per_job_of_one_database_without_the_bench_s_own(server: str) -> None:
    ours, other = create_database(server, "timed"), create_database(server, "untimed")
    pg_time.install(_admin(server))
    tally = pg_time.Tally()
    with (
        psycopg.connect(ours, autocommit=True) as conn,
        psycopg.connect(other, autocommit=True) as elsewhere,
    ):
        conn.execute("CREATE TABLE t (n int)")
        elsewhere.execute("CREATE TABLE u (n int)")
        with pg_time.measured(_admin(server), "timed", tally, jobs=4):
            for n in range(4):
                conn.execute("INSERT INTO t VALUES (%s)", (n,))
            conn.execute("SELECT pg_sleep(0.02)")
            conn.execute("CHECKPOINT")  # the bench's own: left out
            for n in range(50):
                elsewhere.execute("INSERT INTO u VALUES (%s)", (n,))  # another database

    texts = {s.query: s.calls for s in tally.statements.values()}
    assert texts == {"INSERT INTO t VALUES ($1)": 4, "SELECT pg_sleep($1)": 1}
    assert tally.calls_per_job() == 5 / 4
    assert 20_000 / 4 <= tally.us_per_job() < 1_000_000 / 4  # the sleep, per job
    assert tally.bench_ms > 0
    assert tally.top()[0].query == "SELECT pg_sleep($1)"


def test_statements_and_log_lines_of_one_call(server: str) -> None:
    url = create_database(server, "logged")
    log = Log(log_statements(_admin(server)), "logged")
    with (
        psycopg.connect(url, autocommit=True) as conn,
        psycopg.connect(_admin(server), autocommit=True) as elsewhere,
    ):

        def call() -> None:
            conn.execute("BEGIN")
            conn.execute("SELECT %s::int", (1,))  # extended: parse, bind, execute
            conn.execute("COMMIT")
            elsewhere.execute("SELECT 1")  # another database: not counted

        (statements, lines), _ = log.around(call)
    assert (statements, lines) == (3, 5)
