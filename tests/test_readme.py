"""The READMEs' examples run as written: the curl walk-through and the worker, on a real server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app import create_app
from app.infra import db
from devservers.servers import REPO, Client, Gunicorn, app_settings, prepare_database, server_env
from tests.web.conftest import login

README = REPO / "README.md"
CLIENT_README = REPO / "client" / "README.md"
DOCUMENTED_URL = "http://127.0.0.1:5000"
SHOP_PASSWORD = "a long enough password"  # what a newcomer types after --password-stdin


def blocks(path: Path, language: str, start: str = "", end: str = "") -> list[str]:
    """The fenced ``language`` blocks of ``path``, between the headings ``start`` and ``end``."""
    text = path.read_text()
    if start:
        text = text[text.index(start) :]
    if end:
        text = text[: text.index(end)]
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.S | re.M)


def section(heading: str) -> str:
    """The README's text under ``heading``, up to the next heading of the same level."""
    text = README.read_text()
    begin = text.index(heading)
    after = text.find("\n## ", begin + len(heading))
    return text[begin : after if after != -1 else None]


@pytest.mark.parametrize("path", [README, CLIENT_README], ids=["README", "client-README"])
def test_the_python_examples_define_every_name_they_use(path: Path) -> None:
    """Each example is a whole program a reader can paste: no name that nothing defines."""
    ruff = Path(sys.prefix) / "bin" / "ruff"
    for code in blocks(path, "python"):
        checked = subprocess.run(
            [str(ruff), "check", "--isolated", "--select", "F821", "--stdin-filename", "x.py", "-"],
            input=code,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert checked.returncode == 0, f"{checked.stdout}\n{code}"


def test_the_readme_says_what_make_test_needs_and_how_long_it_takes() -> None:
    commands = section("## The two commands")
    assert "`postgresql`" in commands and "`chromium`" in commands
    assert re.search(r"about \d+ minutes", commands)
    assert "make run PORT=" in commands


def test_the_readme_documents_the_default_priority() -> None:
    assert "A job enqueued without one is `low`" in README.read_text()


def _script(blocks_: list[str], url: str) -> str:
    """The blocks as one bash script against ``url``, with the venv that runs these tests."""
    text = "\n".join(blocks_).replace(DOCUMENTED_URL, url)
    text = text.replace(". .venv/bin/activate", f". {sys.prefix}/bin/activate")
    return f'set -euo pipefail\n{text}\nprintf \'\\nTOKENS %s %s\\n\' "$P" "$W"\n'


@pytest.mark.slow
def test_the_curl_walk_through_and_the_worker_example_run_as_written(tmp_path: Path) -> None:
    database = prepare_database(tmp_path / "db", {})
    server = Gunicorn(database, tmp_path, workers=1).start()
    try:
        url = f"http://{server.host}"
        walk = blocks(README, "sh", "## A job's life with curl", "## The pages")
        done = subprocess.run(
            ["bash", "-c", _script(walk, url)],
            cwd=REPO,
            env=server_env(database),
            input=SHOP_PASSWORD + "\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        producer_token, worker_token = done.stdout.rsplit("TOKENS ", 1)[1].split()
        producer = Client(server.host, producer_token)
        for job_id in (1, 2):
            status, job, _ = producer.get(f"/jobs/{job_id}")
            assert (status, job["status"]) == (200, "completed"), done.stdout
        _, job, _ = producer.get("/jobs/1")
        assert job["result"] == {"message_id": "abc"} and job["priority"] == "high"
        app = create_app(app_settings(database))
        assert login(app.test_client(), "shop", SHOP_PASSWORD).status_code == 302  # pages too
        db.close(app)
        _run_the_worker_example(tmp_path, url, producer, worker_token)
    finally:
        server.stop()


def _run_the_worker_example(tmp_path: Path, url: str, producer: Client, token: str) -> None:
    """``mailer.py`` and the ``queuelog-worker`` line, as the README shows them."""
    (mailer,) = blocks(README, "python", "## Workers in Python", "## A job's life with curl")
    (command,) = blocks(README, "sh", "## Workers in Python", "## A job's life with curl")
    (tmp_path / "mailer.py").write_text(mailer)
    _, good, _ = producer.post("/jobs", {"type": "email.send", "payload": {"to": "bo@example.com"}})
    _, bad, _ = producer.post("/jobs", {"type": "email.send", "payload": {"to": "nobody"}})
    env = {**os.environ, "W": token, "PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ['PATH']}"}
    with subprocess.Popen(
        ["bash", "-c", command.strip().replace(DOCUMENTED_URL, url)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # bash and the worker it runs: one group to signal
    ) as worker:
        try:
            deadline = time.monotonic() + 60
            while _status(producer, good["id"]) != "completed" or (
                _status(producer, bad["id"]) != "failed"
            ):
                assert worker.poll() is None, worker.communicate()
                assert time.monotonic() < deadline, "the worker did not finish both jobs"
                time.sleep(0.3)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    sent = tmp_path / "outbox" / f"{good['id']}.json"
    assert json.loads(sent.read_text()) == {"to": "bo@example.com"}
    assert producer.get(f"/jobs/{good['id']}")[1]["result"] == {"message_id": sent.name}


def _status(producer: Client, job_id: int) -> str:
    status, job, _ = producer.get(f"/jobs/{job_id}")
    assert status == 200, job
    return str(job["status"])
