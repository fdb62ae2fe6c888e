"""A server process imports only what serving needs: Alembic (migrations run from the command
line) and segno (a QR code, drawn only when someone enrols a second factor) stay out of every
server worker's memory until they are used (``rsgi`` under ``make serve``, ``wsgi`` under plain
gunicorn)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devservers.servers import REPO, Database, server_env

CHECK = "import sys, {}; print(' '.join(m for m in ('alembic', 'segno') if m in sys.modules))"


@pytest.mark.parametrize("entry", ["rsgi", "wsgi"])
def test_the_production_app_loads_neither_alembic_nor_segno(tmp_path: Path, entry: str) -> None:
    env = server_env(Database(tmp_path / "queuelog.sqlite3"))
    loaded = subprocess.run(
        [sys.executable, "-c", CHECK.format(entry)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == []
