"""A worker whose long-polls find nothing is still polling, as every app server sees it: the
poll is noted in the database, not only in the memory of the process that served it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from devservers.servers import Client, Gunicorn, prepare_database, running

pytestmark = pytest.mark.slow
IDLE_SECONDS = 2  # EXPLAIN_IDLE_WORKER_SECONDS: a claim older than this no longer counts


def reasons(client: Client, job_id: int) -> dict[str, Any]:
    status, body, _ = client.get(f"/jobs/{job_id}/explain")
    assert status == 200, body
    return {reason["code"]: reason["figures"] for reason in body["reasons"]}


def test_a_long_polling_worker_is_seen_polling_by_another_app_server(tmp_path: Path) -> None:
    users = {"shop": "producer", "w1": "worker", "root": "admin"}
    database = prepare_database(tmp_path / "db", users)
    config = {"EXPLAIN_IDLE_WORKER_SECONDS": IDLE_SECONDS}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    with (
        running(Gunicorn(database, tmp_path / "a", workers=1, **config)) as serves_worker,
        running(Gunicorn(database, tmp_path / "b", workers=1, **config)) as serves_pages,
    ):
        worker = Client(serves_worker.host, database.tokens["w1"])
        producer = Client(serves_pages.host, database.tokens["shop"])
        admin = Client(serves_pages.host, database.tokens["root"])
        status, _, _ = admin.request("PATCH", "/types/report.build", {"max_running": 1})
        assert status == 200
        ids = [producer.post("/jobs", {"type": "report.build"})[1]["id"] for _ in range(2)]
        status, claimed, _ = worker.post("/jobs/claim", {"types": ["report.build"]})
        assert (status, claimed["id"]) == (200, ids[0])  # and it runs for a long time
        deadline = time.monotonic() + 30
        while "no_worker_polling" not in reasons(producer, ids[1]):  # the claim has aged
            assert time.monotonic() < deadline, "the claim never aged past the idle window"
            time.sleep(0.2)
        # The worker keeps long-polling; max_running holds the second job back.
        status, _, _ = worker.post("/jobs/claim", {"types": ["report.build"], "wait_seconds": 1})
        assert status == 204
        found = reasons(producer, ids[1])
        assert "type_at_max_running" in found
        assert "no_worker_polling" not in found, found
