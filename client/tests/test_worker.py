"""The Worker and the runner against today's server: a refused claim stops them cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Server
from queuelog_client import Client, Unauthorized, Worker

pytestmark = pytest.mark.slow


def test_a_refused_claim_stops_the_worker_with_the_error(server: Server) -> None:
    with Client(server.url, "revoked-or-never-issued") as client:
        worker = Worker(client, {"email.send": lambda ctx: None}, concurrency=2)
        with pytest.raises(Unauthorized):
            worker.run()  # in the test's main thread: signal handlers installed and restored
    assert worker.reporter.stats.completed == 0 and worker.abandoned == 0


def test_the_runner_exits_1_when_the_server_refuses_its_token(
    server: Server, tmp_path: Path
) -> None:
    (tmp_path / "noop_handlers.py").write_text("HANDLERS = {'email.send': lambda ctx: None}\n")
    env = {**os.environ, "QUEUELOG_TOKEN": "revoked-or-never-issued"}
    argv = [sys.executable, "-m", "queuelog_client.cli", "noop_handlers:HANDLERS"]
    argv += ["--url", server.url]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "claim refused" in done.stderr and "worker stopped" in done.stderr
