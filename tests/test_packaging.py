"""``pip install .`` ships the pages: the wheel holds every file of ``templates/`` and
``static/`` inside the app package, and the app installed from it, away from this checkout,
renders a page and serves a static file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from devservers.servers import REPO, SECRET

pytestmark = pytest.mark.slow  # builds a wheel (pip fetches setuptools for the isolated build)

SOURCES = ["pyproject.toml", "setup.py", "README.md", "app", "templates", "static"]
# Runs in the installed copy: the page and a static file, and where the app came from.
PROBE = """
import sys
from app import create_app
app = create_app({"TESTING": True, "SECRET_KEY": sys.argv[1], "DATABASE_URL": sys.argv[2],
                  "INSTANCE_PATH": sys.argv[3]})
client = app.test_client()
login, script = client.get("/login"), client.get("/static/htmx.min.js")
print(login.status_code, script.status_code, b"<form" in login.data, app.root_path)
"""


def _wheel(tmp_path: Path) -> Path:
    """A wheel built from a copy of the sources (the build leaves its files beside them)."""
    source = tmp_path / "source"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            source.mkdir(exist_ok=True)
            shutil.copy(REPO / name, source / name)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)]
    subprocess.run(pip, check=True, capture_output=True, timeout=600)
    (wheel,) = dist.glob("queuelog-*.whl")
    return wheel


def test_the_wheel_ships_the_pages_and_the_installed_app_serves_them(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("templates", "static"):
        files = [p.relative_to(REPO).as_posix() for p in (REPO / folder).rglob("*") if p.is_file()]
        assert files and {f"app/{name}" for name in files} <= names, folder
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
