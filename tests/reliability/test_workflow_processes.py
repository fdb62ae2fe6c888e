"""Workflows under real processes, on both engines: a group's callbacks are enqueued exactly once
when its last members finish at the same moment in several processes, and a graph of 1,000 jobs
runs through ``queuelog-worker`` in dependency order."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from app.storage.schema import job_events, jobs
from devservers.servers import Client, Database, Served, prepare_database, running
from tests.backends import every_backend  # noqa: F401 (both engines)

pytestmark = pytest.mark.slow

USERS = {"producer": "producer", "worker": "worker"}
GROUPS, MEMBERS = 12, 4  # each group's members are finished by MEMBERS processes at once
CHAINS, CHAIN_LENGTH = 100, 10  # the graph: a fan-out of 100 chains of 10 jobs
RUNNERS = 2


@pytest.fixture
def database(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Database:
    url = None if backend == "sqlite" else request.getfixturevalue("database_url")
    return prepare_database(tmp_path / "db", USERS, url=url)


@pytest.fixture
def server(database: Database, tmp_path: Path) -> Iterator[Served]:
    """``make serve``'s server with two processes, so finishes race across processes."""
    with running(Served(database, tmp_path, workers=2)) as served:
        yield served


def _rows(database: Database, *columns: Any) -> list[Any]:
    engine = create_engine(database.url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(*columns)))
    finally:
        engine.dispose()


def _finish_in_step(
    host: str, token: str, mine: list[dict[str, Any]], barrier: Any, answers: Any
) -> None:
    """One racing process: for each group in turn, wait until every process is ready, then
    finish this process's member of it. Puts the answer status of each finish on
    ``answers``."""
    client = Client(host, token)
    statuses = []
    for job in mine:
        barrier.wait(timeout=60)
        outcome = "failed" if job["payload"].get("fail") else "completed"
        result = {"id": job["id"], "attempt": job["attempt"], "outcome": outcome}
        result |= {"error": "boom", "retryable": False} if outcome == "failed" else {"result": {}}
        status, body, _ = client.post("/jobs/finish", {"results": [result]})
        statuses.append(body["results"][0]["status"] if status == 200 else status)
    answers.put(statuses)


def test_a_groups_callbacks_are_enqueued_once_when_its_last_members_finish_at_once(
    server: Served, database: Database
) -> None:
    producer = Client(server.host, database.tokens["producer"])
    worker = Client(server.host, database.tokens["worker"])
    group_ids = []
    for g in range(GROUPS):
        members = [
            # in every other group one member fails for good, so on_success must not fire
            {"type": "email.send", "max_retries": 0, "payload": {"fail": g % 2 == 1 and m == 0}}
            for m in range(MEMBERS)
        ]
        group = {
            "name": f"race-{g}",
            "on_complete": {"type": "report.build", "payload": {"group": g}},
            "on_success": {"type": "report.build", "payload": {"group": g, "ok": True}},
        }
        status, answer, _ = producer.post("/jobs/batch", {"jobs": members, "group": group})
        assert status == 201, answer
        group_ids.append(answer["group_id"])
    claim = {"max_jobs": GROUPS * MEMBERS, "types": ["email.send"], "lease_seconds": 120}
    status, answer, _ = worker.post("/jobs/claim", claim)
    assert status == 200 and len(answer["jobs"]) == GROUPS * MEMBERS, answer
    by_group: dict[int, list[dict[str, Any]]] = {g: [] for g in group_ids}
    for job in answer["jobs"]:
        by_group[job["group_id"]].append(job)

    spawn = multiprocessing.get_context("spawn")
    barrier, answers = spawn.Barrier(MEMBERS), spawn.Queue()
    racers = [
        spawn.Process(
            target=_finish_in_step,
            args=(server.host, database.tokens["worker"], share, barrier, answers),
        )
        for share in ([by_group[g][m] for g in group_ids] for m in range(MEMBERS))
    ]
    for racer in racers:
        racer.start()
    statuses = [status for _ in racers for status in answers.get(timeout=120)]
    for racer in racers:
        racer.join(timeout=30)
    assert statuses == [200] * GROUPS * MEMBERS

    callbacks = Counter(
        (callback_of, payload.get("ok", False))
        for callback_of, payload in _rows(database, jobs.c.callback_of, jobs.c.payload)
        if callback_of is not None
    )
    # A new connection: on a busy machine the race outlasts the server's header timeout, which
    # closes the producer's idle one.
    producer = Client(server.host, database.tokens["producer"])
    for g, group_id in enumerate(group_ids):
        status, group, _ = producer.get(f"/groups/{group_id}")
        assert status == 200 and group["finished"], group
        assert callbacks[(group_id, False)] == 1, (group_id, callbacks)
        assert callbacks[(group_id, True)] == (0 if g % 2 else 1), (group_id, callbacks)
        assert group["callbacks"]["on_complete"] is not None
        assert (group["callbacks"]["on_success"] is None) == (g % 2 == 1)


HANDLERS = "HANDLERS = {'email.send': lambda ctx: {'ok': True}, 'report.build': lambda ctx: None}\n"


def _graph() -> list[dict[str, Any]]:
    """100 chains of 10: item ``c * CHAIN_LENGTH + s`` runs after the step before it."""
    items: list[dict[str, Any]] = []
    for _chain in range(CHAINS):
        for step in range(CHAIN_LENGTH):
            item: dict[str, Any] = {"type": "email.send"}
            if step:
                item["after_items"] = [len(items) - 1]
            items.append(item)
    return items


def test_a_graph_of_1000_jobs_runs_in_dependency_order_through_queuelog_worker(
    server: Served, database: Database, tmp_path: Path
) -> None:
    producer = Client(server.host, database.tokens["producer"], timeout=60)
    group = {"name": "graph", "on_complete": {"type": "report.build"}}
    group["on_success"] = {"type": "report.build", "payload": {"ok": True}}
    status, answer, _ = producer.post("/jobs/batch", {"jobs": _graph(), "group": group})
    assert status == 201, answer
    graph_ids = [job["id"] for job in answer["jobs"]]
    (tmp_path / "graph_handlers.py").write_text(HANDLERS)
    env = {**os.environ, "QUEUELOG_TOKEN": database.tokens["worker"]}
    argv = [sys.executable, "-m", "queuelog_client.cli", "graph_handlers:HANDLERS"]
    argv += ["--url", f"http://{server.host}", "--concurrency", "8"]
    log = (tmp_path / "runners.log").open("wb")  # a line per job: kept out of the test's output
    runners = [
        subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        for _ in range(RUNNERS)
    ]
    log.close()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            statuses = Counter(status for (status,) in _rows(database, jobs.c.status))
            if statuses == {"completed": len(graph_ids) + 2}:
                break
            time.sleep(0.5)
    finally:
        for runner in runners:
            runner.terminate()
        exits = [runner.wait(timeout=60) for runner in runners]
        assert exits == [0] * RUNNERS, (tmp_path / "runners.log").read_text()[-2000:]
    assert statuses == {"completed": len(graph_ids) + 2}, statuses

    rows = {
        row.id: row
        for row in _rows(
            database, jobs.c.id, jobs.c.depends_on, jobs.c.callback_of, jobs.c.attempts
        )
    }
    # Event ids follow commit order (a child can be claimed only once its parent's completion
    # has committed); the clocks of the requests cannot show it, each is read as it starts.
    seen = {
        (job_id, kind): event_id
        for event_id, job_id, kind in _rows(
            database, job_events.c.id, job_events.c.job_id, job_events.c.kind
        )
    }
    for job_id in graph_ids:
        assert rows[job_id].attempts == 1, rows[job_id]
        for parent in rows[job_id].depends_on or ():
            assert seen[(job_id, "claimed")] > seen[(parent, "completed")], (job_id, parent)
    assert sum(1 for job_id in graph_ids if rows[job_id].depends_on) == CHAINS * (CHAIN_LENGTH - 1)
    callbacks = [row.id for row in rows.values() if row.callback_of == answer["group_id"]]
    assert len(callbacks) == 2
    last_member = max(seen[(job_id, "completed")] for job_id in graph_ids)
    assert all(seen[(callback, "enqueued")] > last_member for callback in callbacks)
