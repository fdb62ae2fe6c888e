"""`make run` as a newcomer types it: the port given on the command line is the one served."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from devservers.servers import REPO, SECRET, free_port

pytestmark = pytest.mark.slow


def test_make_run_serves_and_prints_the_port_it_is_given(tmp_path: Path) -> None:
    port = free_port()
    venv = Path(sys.prefix)  # the venv running the tests: `make install` has nothing to do
    env = {
        **os.environ,
        "FLASK_DATABASE_URL": f"sqlite:///{tmp_path / 'queuelog.sqlite3'}",
        "FLASK_SECRET_KEY": SECRET,
    }
    argv = ["make", "-o", f"{venv}/.installed-stamp", "run", f"VENV={venv}", f"PORT={port}"]
    with subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # make, flask and the server share a group to stop
    ) as make:
        try:
            _check_served(make, port)
        finally:
            os.killpg(make.pid, signal.SIGTERM)
            make.wait(timeout=10)


def _check_served(make: subprocess.Popen[str], port: int) -> None:
    """The first-run hint names ``port``, and the server answers there."""
    lines: list[str] = []
    assert make.stdout is not None
    for line in make.stdout:
        lines.append(line)
        if "password:" in line:
            break
    assert f"Log in at http://127.0.0.1:{port}/login" in "".join(lines), lines
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                assert r.status == 200
                break
        except OSError:
            assert make.poll() is None, "make run exited"
            assert time.monotonic() < deadline, f"nothing answers on port {port}"
            time.sleep(0.2)
