"""Shared fixtures: a migrated SQLite file per test, clients, API callers per role."""

from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from jinja2.bccache import Bucket, BytecodeCache
from sqlalchemy import create_engine, text

from app import create_app
from app.infra import db
from app.storage import migrate
from devservers.postgres import bin_dir, postgres_server
from tests.builders import Api, make_api
from tests.pg_databases import Databases

TEST_SECRET = "test-secret-key-3rGq7vXw1-NzKp0sTyB8uHd4LmQe6Jc9aFb2WoPi5"
# A Fernet key (the format of SECRETS_KEY): test apps encrypt TOTP secrets under it.
TEST_SECRETS_KEY = "zF6ucAaOK_BwvsG35SO9BR6SCT4G4xRdDRqA3vxor70="
JOB_TYPES = ["email.send", "report.build", "webhook.deliver"]
PG_TEMPLATE = "queuelog_template"
# The collector's default of a young generation of 700 objects and a full collection every
# hundredth one spent a sixth of an in-process test's CPU time: each full collection walked the
# whole heap of every imported module (schemathesis, Playwright, SQLAlchemy, ...) and of the apps
# that earlier tests left for it, about 0.2 s. Rarer collections find the same garbage; a test
# that leaks a connection still warns (pytest collects and reports what is left at the end).
gc.set_threshold(10_000, 10, 10)


class _CompiledTemplates(BytecodeCache):
    """Templates compiled once per test process: each test makes its own app, and with it a
    Jinja environment that would lex, parse and compile every template it renders again (a
    quarter of the page tests' CPU time). Keyed by the template's name and checked against its
    source's checksum, as Jinja's own caches are."""

    def __init__(self) -> None:
        self._compiled: dict[str, tuple[str, Any]] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        checksum, code = self._compiled.get(bucket.key, ("", None))
        if code is not None and checksum == bucket.checksum:
            bucket.code = code

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._compiled[bucket.key] = (bucket.checksum, bucket.code)


Flask.jinja_options = {**Flask.jinja_options, "bytecode_cache": _CompiledTemplates()}


def base_config(database_url: str, **overrides: Any) -> dict[str, Any]:
    """The config every test app starts from."""
    return {
        "TESTING": True,
        "SECRET_KEY": TEST_SECRET,
        "SECRETS_KEY": TEST_SECRETS_KEY,
        "DATABASE_URL": database_url,
        "JOB_TYPES": JOB_TYPES,
        "SQLITE_SYNCHRONOUS": "NORMAL",
        # A password hash in RFC 9106's profile costs 0.17 s; the web tests make hundreds.
        "PASSWORD_HASH_PROFILE": "CHEAPEST",
        # Housekeeping runs when a test asks for it (`flask jobs tick`, the housekeeping object).
        "HOUSEKEEPING_THREAD": False,
        **overrides,
    }


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per session; each test gets a copy."""
    path = tmp_path_factory.mktemp("template") / "queuelog.sqlite3"
    app = create_app(base_config(f"sqlite:///{path}"))
    migrate.upgrade(db.engine(app))
    db.close(app)
    return path


@pytest.fixture
def database_path(tmp_path: Path, migrated_template: Path) -> Path:
    """A fresh, migrated SQLite file for this test."""
    path = tmp_path / "queuelog.sqlite3"
    shutil.copy(migrated_template, path)
    return path


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """A throwaway PostgreSQL server for the session (base URL, no database). Without the server
    binaries: a skip, or a failure where CI asks for PostgreSQL (QUEUELOG_REQUIRE_POSTGRES=1)."""
    if bin_dir() is None:
        if os.environ.get("QUEUELOG_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL server binaries not found (apt-get install postgresql)")
        pytest.skip("PostgreSQL server binaries not found; install Debian's postgresql to run")
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_template(postgres_server_url: str) -> str:
    """A migrated database that each PostgreSQL test clones."""
    _admin_sql(postgres_server_url, f"CREATE DATABASE {PG_TEMPLATE}")
    app = create_app(base_config(f"{postgres_server_url}/{PG_TEMPLATE}"))
    migrate.upgrade(db.engine(app))
    db.close(app)
    return PG_TEMPLATE


@pytest.fixture(scope="session")
def postgres_databases(postgres_server_url: str, postgres_template: str) -> Iterator[Databases]:
    databases = Databases(postgres_server_url, postgres_template)
    yield databases
    databases.close()


def _admin_sql(server_url: str, statement: str) -> None:
    engine = create_engine(f"{server_url}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(statement))
    engine.dispose()


@pytest.fixture
def backend() -> str:
    """The database engine under test; a folder's conftest may parametrize it."""
    return "sqlite"


@pytest.fixture
def database_url(request: pytest.FixtureRequest, backend: str) -> Iterator[str]:
    """A fresh, migrated database of the chosen backend for this test."""
    if backend == "sqlite":
        yield f"sqlite:///{request.getfixturevalue('database_path')}"
        return
    databases: Databases = request.getfixturevalue("postgres_databases")
    with databases.lent() as url:
        yield url


@pytest.fixture
def app_config() -> dict[str, Any]:
    """Per-test config overrides (override this fixture in a module to change settings)."""
    return {}


@pytest.fixture
def app(database_url: str, app_config: dict[str, Any]) -> Iterator[Flask]:
    """The app on a real database: a SQLite file unless ``backend`` says otherwise."""
    application = create_app(base_config(database_url, **app_config))
    yield application
    db.close(application)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(app: Flask) -> FlaskCliRunner:
    return app.test_cli_runner()


@pytest.fixture
def producer(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "producer", "producer")


@pytest.fixture
def other_producer(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "other-producer", "producer")


@pytest.fixture
def worker(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "worker", "worker")


@pytest.fixture
def other_worker(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "other-worker", "worker")


@pytest.fixture
def admin(app: Flask, client: FlaskClient) -> Api:
    return make_api(app, client, "admin", "admin")


@pytest.fixture
def anonymous(client: FlaskClient) -> Api:
    return Api(client, None)


def _reuse_url_builders() -> None:
    """Every test builds its own app, and werkzeug turns each of its ~70 routes into two URL
    builder functions by compiling an AST, again for every app: about 65 ms an app, two thirds
    of a SQLite test's setup. A builder depends only on the rule's text, its parsed trace, its
    defaults and whether it appends unknown arguments (it reaches the rule's converters through
    its ``self`` argument when called), so each one is compiled once per test process and bound
    to every rule like it. Routing itself is unchanged: the app still builds every rule."""
    from werkzeug.routing.rules import Rule

    compile_builder = Rule._compile_builder
    builders: dict[tuple[Any, ...], Any] = {}

    def reused(self: Rule, append_unknown: bool = True) -> Any:
        defaults = repr(sorted((self.defaults or {}).items()))
        key = (self.rule, tuple(self._trace), defaults, append_unknown)
        if key not in builders:
            builders[key] = compile_builder(self, append_unknown)
        return builders[key]

    Rule._compile_builder = reused  # type: ignore[method-assign]


_reuse_url_builders()


def pytest_collection_finish() -> None:
    """Everything imported to collect the tests lives as long as the test process: the
    collector need not walk it again (``gc.freeze``)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Deal the slow tests out so that every test process starts with its share of them.

    ``make test`` runs pytest-xdist's worksteal: each of the N processes is handed a contiguous
    Nth of the collection, and an idle one later takes the back half of the longest queue left.
    In collection order the slow tests (servers, workers, installs: a minute or two each at
    worst) bunch in a few of those parts, so one process still had minutes of them to run when
    the others were done. Dealt to the front of the parts, a module's slow tests together (its
    module-scoped server starts once) and the biggest modules first to the part with the fewest,
    they run first on every process, and the fast tests, which the stealing balances finely,
    fill in the end. The fast tests keep their collection order (module fixtures stay shared)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        return
    slow: dict[str, list[pytest.Item]] = {}  # by module
    fast: list[pytest.Item] = []
    for item in items:
        if item.get_closest_marker("slow"):
            slow.setdefault(item.nodeid.split("::")[0], []).append(item)
        else:
            fast.append(item)
    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for module in sorted(slow.values(), key=len, reverse=True):
        min(heads, key=len).extend(module)
    ordered: list[pytest.Item] = []
    left, taken = len(items), 0
    for part, head in enumerate(heads):
        size = left // (workers - part)  # the part worksteal hands this process first
        left -= size
        tail = fast[taken : taken + max(size - len(head), 0)]
        taken += len(tail)
        ordered += head + tail
    items[:] = ordered + fast[taken:]
