"""Handler outcomes, the job context, the models and the command line's refusals (no server)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from queuelog_client import Client, Fail, Job, JobContext, Retry, Worker
from queuelog_client.handlers import run_handler

AT = "2026-12-01T06:56:13.123456Z"
# A running job as the server sends it (every key of JobOut but the optional ones).
JOB = {
    **{"id": 5, "type": "email.send", "payload": {"to": "x"}, "priority": "low"},
    **{"status": "running", "retry_count": 0, "max_retries": 3, "attempt": 2},
    **{"idempotency_key": None, "run_at": AT, "claimed_at": AT, "lease_expires_at": AT},
    **{"worker_id": "w", "progress": None, "progress_message": None, "result": None},
    **{"created_at": AT, "updated_at": AT, "finished_at": None, "secret_names": []},
    **{"deadline_at": None, "depends_on": [], "waiting_for": [], "group_id": None},
    **{"parent_id": None, "trace": None, "partition": None},
}


def context() -> JobContext:
    return JobContext(Job.from_json(JOB))


def test_a_job_parses_timestamps_and_keeps_unknown_fields() -> None:
    job = Job.from_json({**JOB, "duplicate": True, "newer_field": 1})
    assert job.run_at == datetime(2026, 12, 1, 6, 56, 13, 123456, tzinfo=UTC)
    assert job.finished_at is None and job.duplicate is True
    assert job.extra == {"newer_field": 1}


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (
            lambda ctx: {"sent": ctx.payload["to"]},
            {"outcome": "completed", "result": {"sent": "x"}},
        ),
        (lambda ctx: None, {"outcome": "completed"}),
        (
            lambda ctx: (_ for _ in ()).throw(Retry(after=30)),
            {"outcome": "failed", "error": "retry requested", "retry_in": 30},
        ),
        (
            lambda ctx: (_ for _ in ()).throw(Fail("bad address")),
            {"outcome": "failed", "error": "bad address", "retryable": False},
        ),
        (lambda ctx: 1 / 0, {"outcome": "failed", "error": "ZeroDivisionError: division by zero"}),
        (
            lambda ctx: [1],
            {
                "outcome": "failed",
                "error": "TypeError: " + "a handler returns a dict or None, not list",
            },
        ),
        (
            lambda ctx: {"x": float("nan")},
            {
                "outcome": "failed",
                "error": "ValueError: Out of range float values are not JSON compliant",
            },
        ),
    ],
)
def test_run_handler_describes_the_outcome(handler: Any, expected: dict[str, Any]) -> None:
    assert run_handler(handler, context()) == {"id": 5, "attempt": 2, **expected}


def test_progress_keeps_the_latest_report_and_checks_it() -> None:
    ctx = context()
    ctx.progress(10)
    ctx.progress(40, "rendering")
    assert ctx.take_progress() == (40, "rendering") and ctx.take_progress() is None
    ctx.restore_progress((40, "rendering"))
    ctx.progress(50)
    ctx.restore_progress((40, "rendering"))  # a newer report wins over a failed older one
    assert ctx.take_progress() == (50, None)
    for bad in (-1, 101, 5.5, True):
        with pytest.raises(ValueError):
            ctx.progress(bad)  # type: ignore[arg-type]


def test_a_worker_needs_a_handler_for_every_type() -> None:
    with Client("http://127.0.0.1:9", "t") as client:
        with pytest.raises(ValueError, match=r"report\.build"):
            Worker(client, {"email.send": lambda ctx: None}, types=["report.build"])
        with pytest.raises(ValueError, match="concurrency"):
            Worker(client, {"email.send": lambda ctx: None}, concurrency=0)
        assert Worker(client, {"a": lambda ctx: None, "b": lambda ctx: None}).types == ["a", "b"]


def runner(*args: str, token: str | None = None, cwd: Path | None = None) -> Any:
    env = {k: v for k, v in os.environ.items() if k != "QUEUELOG_TOKEN"}
    if token is not None:
        env["QUEUELOG_TOKEN"] = token
    argv = [sys.executable, "-m", "queuelog_client.cli", *args]
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_the_runner_refuses_a_token_on_the_command_line() -> None:
    done = runner("m:H", "--url", "http://127.0.0.1:9", "--token", "secret", token="t")
    assert done.returncode == 2 and "QUEUELOG_TOKEN" in done.stderr


def test_the_runner_needs_the_token_variable() -> None:
    done = runner("m:H", "--url", "http://127.0.0.1:9")
    assert done.returncode == 2 and "set QUEUELOG_TOKEN" in done.stderr


def test_the_runner_says_what_is_wrong_with_the_handlers(tmp_path: Path) -> None:
    (tmp_path / "jobs_here.py").write_text("HANDLERS = {'email.send': 42}\n")
    done = runner("jobs_here:HANDLERS", "--url", "http://x", token="t", cwd=tmp_path)
    assert done.returncode == 2 and "dict of job type -> handler" in done.stderr
    done = runner("no_such_module:HANDLERS", "--url", "http://x", token="t", cwd=tmp_path)
    assert done.returncode == 2 and "no_such_module" in done.stderr
    done = runner("jobs_here", "--url", "http://x", token="t", cwd=tmp_path)
    assert done.returncode == 2 and "MODULE:HANDLERS" in done.stderr


def test_retry_after_is_checked_where_it_is_raised() -> None:
    def handler(ctx: JobContext) -> None:
        raise Retry(after=-1)

    item = run_handler(handler, context())
    assert item["outcome"] == "failed" and item["error"].startswith("ValueError: Retry(after")
