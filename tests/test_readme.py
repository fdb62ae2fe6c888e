"""The READMEs' examples run as written: the first job, the worker, the client and the workflow,
on a real server, in the order a newcomer types them; every other block is run by the test named
for it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
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
# The sections a newcomer follows in a second terminal, run as one script by the walk-through.
WALK = ("## Your first job", "## Beyond the basics")
# Every other block of the README, by its first line: the test that runs it, or why none need.
ACCOUNTED = {
    "make run    # a development server": "tests/test_makefile.py (make run in a fresh checkout)"
    " and .ci/run (make test)",
    "created the first user. Log in at": "make run's output: tests/test_makefile.py",
    "pending   --claim-->": "the lifecycle: tests/queue/domain/test_transitions.py",
    "FLASK_DATABASE_URL=postgresql+psycopg": "settings as JSON: tests/test_config.py",
    "flask --app app setup": "the command line: tests/test_cli.py runs every command",
}
# The client README's blocks that its own walk does not run.
CLIENT_ACCOUNTED = {
    "pip install ./client": "make run installs it: tests/test_makefile.py",
    "QUEUELOG_TOKEN=$W queuelog-worker tasks:HANDLERS": "the README's walk runs it",
}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", flags=re.S | re.M)
FILE_NAME = re.compile(r"#\s*(\w+\.py)\b")  # a Python block names its file on its first line


def blocks(path: Path, language: str | None = None, start: str = "", end: str = "") -> list[str]:
    """The fenced blocks of ``path`` (of ``language`` when given), between the headings
    ``start`` and ``end``."""
    text = path.read_text()
    if start:
        text = text[text.index(start) :]
    if end:
        text = text[: text.index(end)]
    return [body for lang, body in FENCE.findall(text) if language is None or lang == language]


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


@pytest.mark.parametrize(
    ("path", "walked", "accounted"),
    [
        (README, lambda: blocks(README, None, *WALK), ACCOUNTED),
        (CLIENT_README, lambda: blocks(CLIENT_README, "python") + _client_walk(), CLIENT_ACCOUNTED),
    ],
    ids=["README", "client-README"],
)
def test_every_block_is_run_by_a_test(
    path: Path, walked: Callable[[], list[str]], accounted: dict[str, str]
) -> None:
    run = walked()
    for block in blocks(path):
        if block in run:
            continue
        first = block.splitlines()[0]
        assert any(first.startswith(known) for known in accounted), f"no test runs:\n{block}"


def test_the_readme_says_what_make_test_needs_and_how_long_it_takes() -> None:
    commands = section("## The two commands")
    assert "`postgresql`" in commands and "`chromium`" in commands
    assert re.search(r"about \d+ minutes", commands)
    assert "make run PORT=" in commands


def test_the_readme_documents_the_default_priority() -> None:
    assert "A job enqueued without one is `low`" in README.read_text()


def test_nothing_before_the_first_job_ends_speaks_of_its_machinery() -> None:
    """Words a newcomer has not met yet stay after the walk-through."""
    before = README.read_text().split(WALK[1])[0]
    said = re.findall(r"\b(compare-and-set|fencing|fenced|leases?)\b", before, flags=re.I)
    assert not said, said


def _script(walk: list[str], url: str) -> str:
    """The walk's shell blocks as one bash script against ``url``, with the venv that runs
    these tests."""
    text = "\n".join(walk).replace(DOCUMENTED_URL, url)
    text = text.replace(". .venv/bin/activate", f". {sys.prefix}/bin/activate")
    return f'set -euo pipefail\n{text}\nprintf \'\\nTOKENS %s %s\\n\' "$P" "$W"\n'


def _stop_group(group: int) -> None:
    """SIGKILL what is left of a process group (nothing, when all went well)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def _write_files(folder: Path, python_blocks: list[str], url: str) -> None:
    """Each Python block, against ``url``, into the file its first line names (``import json
    # tasks.py``)."""
    for code in python_blocks:
        name = FILE_NAME.search(code.splitlines()[0])
        assert name, f"a Python block that names no file:\n{code}"
        (folder / name.group(1)).write_text(code.replace(DOCUMENTED_URL, url))


@pytest.mark.slow
def test_the_first_job_the_worker_the_client_and_a_workflow_run_as_written(
    tmp_path: Path,
) -> None:
    database = prepare_database(tmp_path / "db", {})
    server = Gunicorn(database, tmp_path, workers=1).start()
    here = tmp_path / "second-terminal"
    here.mkdir()
    shown = tmp_path / "shown.txt"  # what the terminal shows, the worker's log lines too
    try:
        url = f"http://{server.host}"
        _write_files(here, blocks(README, "python", *WALK), url)
        with (
            shown.open("w") as terminal,
            subprocess.Popen(
                ["bash", "-c", _script(blocks(README, "sh", *WALK), url)],
                cwd=here,
                env=server_env(database),
                stdin=subprocess.PIPE,
                stdout=terminal,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # bash and the worker it starts: one group to stop
            ) as walk,
        ):
            try:
                walk.communicate(SHOP_PASSWORD + "\n", timeout=300)
            finally:
                _stop_group(walk.pid)  # what is left of it: a worker, on a failure
        out = shown.read_text()
        assert walk.returncode == 0, out
        tokens = re.search(r"^TOKENS (\S+) \S+$", out, flags=re.M)
        assert tokens, out
        _check_what_the_walk_did(Client(server.host, tokens.group(1)), here, out)
        app = create_app(app_settings(database))
        assert login(app.test_client(), "shop", SHOP_PASSWORD).status_code == 302  # pages too
        db.close(app)
    finally:
        server.stop()


def _check_what_the_walk_did(producer: Client, here: Path, printed: str) -> None:
    """The jobs the walk made, by the ids its comments show, are where the README says."""

    def job(job_id: int) -> dict[str, object]:
        status, found, _ = producer.get(f"/jobs/{job_id}")
        assert status == 200, found
        return dict(found)

    first = job(1)
    assert (first["status"], first["result"], first["priority"]) == (
        "completed",
        {"message_id": "abc"},
        "high",
    )
    assert job(2)["retry_count"] == 1  # failed once, again after its minute
    assert (job(3)["status"], job(3)["result"]) == ("completed", {"sent": True})
    assert job(4)["status"] == "completed"  # the report the worker found waiting
    assert (job(5)["status"], job(6)["status"]) == ("completed", "failed")
    assert json.loads((here / "outbox" / "5.json").read_text()) == {"to": "di@example.com"}
    assert "7 pending" in printed and job(7)["status"] == "completed"  # shop.py
    assert [job(n)["status"] for n in (8, 9, 10)] == ["completed"] * 3
    status, group, _ = producer.get("/groups/1")
    assert status == 200 and group["finished"] and group["callbacks"]["on_complete"], group


def _client_walk() -> list[str]:
    """The client README's shell blocks its walk runs: the report's worker and producer."""
    return [b for b in blocks(CLIENT_README, "sh") if "report.py" in b]


@pytest.mark.slow
def test_the_client_readme_runs_as_written(tmp_path: Path) -> None:
    users = {"shop": "producer", "mailer": "worker", "root": "admin"}
    database = prepare_database(tmp_path / "db", users)
    server = Gunicorn(database, tmp_path, workers=1).start()
    here = tmp_path / "worker-host"
    here.mkdir()
    url = f"http://{server.host}"
    tokens = database.tokens
    env = server_env(database) | {"P": tokens["shop"], "W": tokens["mailer"]}
    env |= {"PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ['PATH']}"}
    try:
        _write_files(here, blocks(CLIENT_README, "python"), url)
        report = _run(["bash", "-c", _script(_client_walk(), url)], here, env)
        assert "completed {'sent_to': 1}" in report, report
        env |= {"QUEUELOG_TOKEN": tokens["shop"], "QUEUELOG_ADMIN_TOKEN": tokens["root"]}
        enqueued = _run([sys.executable, "enqueue.py"], here, env)
        assert " pending " in enqueued and "+00:00" in enqueued.splitlines()[-1], enqueued
        producer = Client(server.host, tokens["shop"])
        status, page, _ = producer.get("/jobs?type=email.send&limit=1")
        assert status == 200 and page["jobs"][0]["payload"] == {"to": "user4999@example.com"}
        status, child, _ = producer.get("/jobs/2")  # the email the report spawned
        assert status == 200 and (child["parent_id"], child["payload"]) == (
            1,
            {"to": "ada@example.com"},
        )
    finally:
        server.stop()


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run ``argv`` (and whatever it starts in the background) to its end; what it printed."""
    shown = cwd / "shown.txt"
    with (
        shown.open("w") as terminal,
        subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=terminal,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ) as process,
    ):
        try:
            process.wait(timeout=300)
        finally:
            _stop_group(process.pid)  # a worker left running in the background
    printed = shown.read_text()
    assert process.returncode == 0, printed
    return printed
