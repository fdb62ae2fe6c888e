"""Attempt logs: the holder of an attempt appends lines (sanitized, bounded per request, per line
and per attempt), admins read them per attempt, nobody else reads them, and they go with their
job, whichever path deletes it (on both engines)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Flask
from sqlalchemy import func, select

from app.infra import db
from app.queue.usecases import job_actions
from app.queue.usecases.attempt_logs import MAX_ATTEMPT_BYTES, dropped_marker
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema_logs import job_logs
from tests.api.conftest import assert_problem, finish
from tests.builders import Api

TOKEN = "ghp_" + "A1b2C3d4E5" * 4


def log(worker: Api, job: dict[str, Any], lines: Any, attempt: int | None = None) -> Any:
    body = {"attempt": job["attempt"] if attempt is None else attempt, "lines": lines}
    return worker.post(f"/jobs/{job['id']}/logs", body)


def log_rows(app: Flask, job_id: int | None = None) -> int:
    """How many rows ``job_logs`` holds (of one job, when given), read with SQL."""
    query = select(func.count()).select_from(job_logs)
    if job_id is not None:
        query = query.where(job_logs.c.job_id == job_id)
    with app.app_context(), db.read() as conn:
        return int(conn.execute(query).scalar_one())


def held_job(producer: Api, worker: Api) -> dict[str, Any]:
    """A job of ``producer`` that ``worker`` holds (claimed from an otherwise empty queue)."""
    producer.enqueue()
    held = worker.claim()
    assert held is not None
    return held


def batch(tag: str) -> list[str]:
    """100 lines of 2,048 bytes (200 KiB), numbered after ``tag``."""
    return [f"{tag}{n:03d}".ljust(2048, ".") for n in range(100)]


def texts(admin: Api, job_id: int) -> dict[int, list[str]]:
    answer = admin.get(f"/jobs/{job_id}/logs")
    assert answer.status_code == 200, answer.get_json()
    return {
        a["attempt"]: [line["text"] for line in a["lines"]] for a in answer.get_json()["attempts"]
    }


def test_the_holder_appends_and_an_admin_reads_them_per_attempt(
    producer: Api, worker: Api, admin: Api
) -> None:
    job = producer.enqueue(max_retries=1)
    first = worker.claim()
    assert first is not None
    answer = log(worker, first, ["starting", "step 1 of 2"])
    assert answer.status_code == 200
    assert answer.get_json() == {"accepted": 2, "dropped": 0}
    assert log(worker, first, ["step 2 of 2"]).status_code == 200
    failed = {"id": job["id"], "attempt": 1, "outcome": "failed", "error": "x", "retry_in": 0}
    assert worker.post("/jobs/finish", {"results": [failed]}).status_code == 200
    second = worker.claim()
    assert second is not None and second["attempt"] == 2
    assert log(worker, second, ["again", ""]).status_code == 200
    body = admin.get(f"/jobs/{job['id']}/logs").get_json()
    assert [a["attempt"] for a in body["attempts"]] == [1, 2]
    assert [line["text"] for line in body["attempts"][0]["lines"]] == [
        "starting",
        "step 1 of 2",
        "step 2 of 2",
    ]
    assert [line["text"] for line in body["attempts"][1]["lines"]] == ["again", ""]
    at = body["attempts"][0]["lines"][0]["at"]
    assert at.endswith("Z") and "T" in at


def test_a_job_without_logs_has_no_attempts(producer: Api, admin: Api) -> None:
    job = producer.enqueue()
    assert admin.get(f"/jobs/{job['id']}/logs").get_json() == {"attempts": []}
    assert_problem(admin.get("/jobs/999999/logs"), 404)


def test_lines_are_sanitized_like_errors(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    held = held_job(producer, worker)
    line = f"\x1b[31mpushing\x1b[0m with {TOKEN} PGPASSWORD=hunter22 \u202eevil"
    assert log(worker, held, [line]).status_code == 200
    assert texts(admin, held["id"]) == {1: ["pushing with [REDACTED] PGPASSWORD=[REDACTED] evil"]}


def test_lone_surrogates_are_mended_not_refused(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    held = held_job(producer, worker)
    raw = '{"attempt": 1, "lines": ["file \\udcff.txt", "ok"]}'
    answer = worker.post(
        f"/jobs/{held['id']}/logs", data=raw, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 200, answer.get_json()
    assert texts(admin, held["id"]) == {1: ["file \ufffd.txt", "ok"]}


def test_request_limits_are_422_and_store_nothing(app: Flask, producer: Api, worker: Api) -> None:
    producer.enqueue()
    held = worker.claim()
    assert held is not None
    body = assert_problem(log(worker, held, ["x"] * 101), 422)
    assert body["errors"] == {"lines": "must be a list of 1 to 100 strings"}
    body = assert_problem(log(worker, held, ["ok", "x" * 2049]), 422)
    assert body["errors"] == {"lines[1]": "must be a string of at most 2048 bytes in UTF-8"}
    assert_problem(log(worker, held, ["é" * 1025]), 422)  # 1,025 characters, 2,050 bytes
    assert_problem(log(worker, held, []), 422)
    assert log_rows(app) == 0
    assert log(worker, held, ["x" * 2048, "é" * 1024] + ["y"] * 98).status_code == 200


def test_past_the_cap_the_oldest_lines_go_and_a_marker_counts_them(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    held = held_job(producer, worker)
    assert log(worker, held, batch("a")).get_json() == {"accepted": 100, "dropped": 0}
    # 400 KiB asked for: 72 of the first lines make room for the second 200 KiB.
    assert log(worker, held, batch("b")).get_json() == {"accepted": 100, "dropped": 72}
    lines = texts(admin, held["id"])[1]
    assert lines[0] == dropped_marker(72)
    assert lines[1].startswith("a072") and lines[28].startswith("a099")
    assert lines[29].startswith("b000") and len(lines) == 1 + 28 + 100
    assert sum(len(line.encode()) for line in lines[1:]) <= MAX_ATTEMPT_BYTES
    # Another 200 KiB: the rest of the first request and 72 of the second go; the count adds up.
    assert log(worker, held, batch("c")).get_json() == {"accepted": 100, "dropped": 100}
    lines = texts(admin, held["id"])[1]
    assert lines[0] == dropped_marker(172)
    assert lines[1].startswith("b072") and len(lines) == 1 + 28 + 100
    assert log_rows(app, held["id"]) == 2


def _refusal(answer: Any) -> tuple[int, str]:
    body = answer.get_json()
    return answer.status_code, body["detail"]


def test_fenced_like_heartbeats(app: Flask, client: Any, producer: Api, worker: Api) -> None:
    from tests.builders import make_api

    other = make_api(app, client, "other-worker", "worker")
    job = producer.enqueue(max_retries=1)
    held = worker.claim()
    assert held is not None

    def both(caller: Api, attempt: int) -> tuple[tuple[int, str], tuple[int, str]]:
        logged = log(caller, held, ["x"], attempt=attempt)
        beat = caller.post(f"/jobs/{job['id']}/heartbeat", {"attempt": attempt})
        return _refusal(logged), _refusal(beat)

    stale, beat = both(worker, 2)
    assert stale == beat and stale[0] == 409  # an attempt that is not the current one
    stolen, beat = both(other, 1)
    assert stolen == beat and stolen[0] == 409  # another worker's attempt
    finish(worker, held)
    done, beat = both(worker, 1)
    assert done == beat and done[0] == 409  # a finished job
    missing = worker.post("/jobs/999999/logs", {"attempt": 1, "lines": ["x"]})
    assert_problem(missing, 404)
    assert log_rows(app) == 0


def test_only_admins_read_logs(
    app: Flask, client: Any, producer: Api, worker: Api, admin: Api
) -> None:
    held = held_job(producer, worker)
    assert log(worker, held, ["secret-ish"]).status_code == 200
    for caller in (producer, worker):  # its own job, the job it holds
        body = assert_problem(caller.get(f"/jobs/{held['id']}/logs"), 403)
        assert "secret-ish" not in str(body)
        assert_problem(caller.get("/jobs/999999/logs"), 403)  # not a way to probe ids either
    assert client.get(f"/jobs/{held['id']}/logs").status_code == 401
    assert_problem(producer.post(f"/jobs/{held['id']}/logs", {"attempt": 1, "lines": ["x"]}), 403)
    assert texts(admin, held["id"]) == {1: ["secret-ish"]}


def test_logs_go_with_their_job_on_bulk_delete(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    running, done = producer.enqueue(), producer.enqueue()
    for _ in range(2):
        held = worker.claim()
        assert held is not None
        assert log(worker, held, ["a", "b"]).status_code == 200
    finish(worker, {"id": done["id"], "attempt": 1})
    assert log_rows(app) == 2
    body = {"action": "delete", "filter": {}, "reason": "tidy", "expect_count": 1}
    applied = admin.post("/jobs/bulk", body)
    assert applied.status_code == 200, applied.get_json()
    assert log_rows(app, done["id"]) == 0
    assert log_rows(app, running["id"]) == 1


def test_logs_go_with_their_job_when_retention_prunes_it(
    app: Flask, producer: Api, worker: Api
) -> None:
    held = held_job(producer, worker)
    assert log(worker, held, ["a"]).status_code == 200
    finish(worker, held)
    assert log_rows(app, held["id"]) == 1
    with app.app_context(), db.transaction() as conn:
        later = utcnow() + timedelta(days=1)
        assert job_actions.prune(conn, finished_before=later, batch=10) == 1
    assert log_rows(app) == 0
