"""Each database's ways live in ``app.storage.databases`` (beside the queue's statements in
``app.queue.sql.dialects``): the rest of the app neither names a database nor asks which one it
runs on, a URL of any other database stops the start with a message, and a SQLite server never
loads the PostgreSQL driver."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app import create_app
from app.config import ConfigError
from devservers.servers import REPO
from tests.conftest import TEST_SECRET

# Where a database may be named: its own ways, the queue's statements, the schema it is given
# and its migrations, and the settings (whose default is a SQLite file).
DATABASE_LAYERS = (
    "app/storage/databases/",
    "app/queue/sql/",
    "app/storage/migrations/",
    "app/storage/schema.py",
    "app/storage/schema_figures.py",
    "app/storage/schema_logs.py",
    "app/storage/schema_types.py",
    "app/storage/sqltypes.py",
    "app/config.py",
)
SETTING = re.compile(r"SQLITE_(SYNCHRONOUS|BUSY_TIMEOUT_MS)")  # names of settings, not databases
NAMED = re.compile(r"sqlite|postgres|psycopg|\bdialect\b", re.IGNORECASE)


def test_no_module_outside_the_database_layers_names_a_database() -> None:
    named = []
    for path in sorted((REPO / "app").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(DATABASE_LAYERS):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if NAMED.search(SETTING.sub("", line)):
                named.append(f"{relative}:{number}: {line.strip()}")
    assert named == []


def _app(tmp_path: Path, url: str) -> Any:
    return create_app(
        {
            "INSTANCE_PATH": str(tmp_path / "instance"),
            "SECRET_KEY": TEST_SECRET,
            "DATABASE_URL": url,
        }
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://queue:hunter2@db/queuelog", "SQLite or PostgreSQL database, not 'mysql'"),
        ("queue:hunter2@db/queuelog", "not a database URL such as sqlite:"),
    ],
)
def test_a_url_of_another_database_stops_the_start(tmp_path: Path, url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as refused:
        _app(tmp_path, url)
    assert "hunter2" not in str(refused.value)


def test_a_sqlite_server_loads_no_postgresql_driver(tmp_path: Path) -> None:
    script = (
        "import sys; from app import create_app; "
        f"app = create_app({{'INSTANCE_PATH': {str(tmp_path)!r}, 'SECRET_KEY': {TEST_SECRET!r}}}); "
        "app.test_client().get('/healthz'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_binary')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[]", loaded.stderr
