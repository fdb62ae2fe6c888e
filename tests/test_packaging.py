"""``pip install .`` ships the app whole: the wheel, built without a packaging warning, holds every
file of ``templates/``, ``static/`` and the migrations inside the app package, and the app
installed from it, away from this checkout, migrates a database, renders a page and serves a
static file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from devservers.servers import REPO, SECRET

pytestmark = pytest.mark.slow  # builds a wheel (pip fetches setuptools for the isolated build)

SOURCES = ["pyproject.toml", "setup.py", "README.md", "app", "templates", "static"]
# A build backend's warnings through pip (``BuildBackendWarning: Package 'x' is absent from the
# `packages` configuration``, ``SetuptoolsDeprecationWarning``...); pip's own notes about the
# machine's configuration (``WARNING: Location ... is ignored``) are not the project's.
PACKAGING_WARNING = re.compile(r"\w+Warning\b|absent from|would be ignored", flags=re.I)
# Runs in the installed copy: migrate, the page and a static file, and where the app came from.
PROBE = """
import sys
from app import create_app
from app.infra import db
from app.storage import migrate
app = create_app({"TESTING": True, "SECRET_KEY": sys.argv[1], "DATABASE_URL": sys.argv[2],
                  "INSTANCE_PATH": sys.argv[3]})
migrate.upgrade(db.engine(app))
client = app.test_client()
login, script = client.get("/login"), client.get("/static/htmx.min.js")
print(login.status_code, script.status_code, b"<form" in login.data, app.root_path)
"""


def _wheel(tmp_path: Path) -> Path:
    """A wheel built from a copy of the sources, links kept as a clone has them (the build
    leaves its files beside them)."""
    source = tmp_path / "source"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name,
                source / name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        else:
            source.mkdir(exist_ok=True)
            shutil.copy(REPO / name, source / name)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)]
    built = subprocess.run(pip, capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    assert not PACKAGING_WARNING.search(built.stdout + built.stderr), built.stderr
    (wheel,) = dist.glob("queuelog-*.whl")
    return wheel


def _files(folder: Path, shipped_as: str) -> set[str]:
    """The files under ``folder``, by their path in the wheel (under ``shipped_as``)."""
    found = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    return {f"{shipped_as}/{name}" for name in found if "__pycache__" not in name}


def test_the_wheel_ships_the_app_whole_and_the_installed_app_serves_it(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("templates", "static", "app/storage/migrations"):
        shipped = _files(REPO / folder, folder if folder.startswith("app/") else f"app/{folder}")
        assert shipped and shipped <= names, folder
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # what installing a pure-Python wheel lays out
    (tmp_path / "instance").mkdir()
    args = [SECRET, f"sqlite:///{tmp_path / 'q.sqlite3'}", str(tmp_path / "instance")]
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["200", "200", "True", str(site / "app")]
