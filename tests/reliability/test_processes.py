"""Real processes, real signals: gunicorn with 4 workers, client processes, kill -9."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import Agents, query
from tests.servers import REPO, Client, Gunicorn, prepare_database, running, server_env

pytestmark = pytest.mark.slow

WORKER_PROCESSES = 8
PRODUCER_PROCESSES = 2
JOBS_PER_PRODUCER = 210


def test_v06_concurrent_claims_through_gunicorn(tmp_path: Path, agents: Agents) -> None:
    """V-06 / issue 3: 8 worker processes race 2 producers through 4 gunicorn workers."""
    users = {f"producer-{i}": "producer" for i in range(PRODUCER_PROCESSES)}
    users |= {f"worker-{i}": "worker" for i in range(WORKER_PROCESSES)}
    database = prepare_database(tmp_path / "db", users)
    start, stop = tmp_path / "start", tmp_path / "stop"
    with running(Gunicorn(database, tmp_path, workers=4)) as server:
        workers = [
            agents.spawn("work", server.host, database.tokens[f"worker-{i}"], start=start, stop=stop)
            for i in range(WORKER_PROCESSES)
        ]
        producers = [
            agents.spawn(
                "produce",
                server.host,
                database.tokens[f"producer-{i}"],
                start=start,
                count=JOBS_PER_PRODUCER,
                prefix=f"p{i}",
            )
            for i in range(PRODUCER_PROCESSES)
        ]
        start.touch()  # everyone starts at once
        produced = [Agents.result(p) for p in producers]
        stop.touch()
        worked = [Agents.result(w) for w in workers]
        log = server.log_tail()

    created = {job_id for report in produced for job_id in report["created"].values()}
    claims = [job_id for report in worked for job_id, _attempt in report["claimed"]]
    duplicates = sum(n - 1 for n in Counter(claims).values() if n > 1)
    errors = [e for report in produced + worked for e in report["errors"]]
    statuses: Counter[str] = Counter()
    for report in produced + worked:
        statuses.update(report["statuses"])
    rows = query(database.path, "SELECT id, status, attempts FROM jobs")
    events = Counter(
        (job_id, kind) for job_id, kind in query(database.path, "SELECT job_id, kind FROM job_events")
    )
    lost = created - set(claims)
    not_completed = [r for r in rows if r[1] != "completed" or r[2] != 1]
    bad_history = [
        job_id
        for job_id, _, _ in rows
        if (events[job_id, "enqueued"], events[job_id, "claimed"], events[job_id, "completed"])
        != (1, 1, 1)
    ]
    active = sum(1 for report in worked if report["claimed"])
    figures = (
        f"jobs={len(created)} rows={len(rows)} client processes={len(workers) + len(producers)} "
        f"(workers={len(workers)}, of which claimed something={active}; producers="
        f"{len(producers)}) gunicorn workers=4 claims={len(claims)} duplicates={duplicates} "
        f"lost={len(lost)} errors={len(errors)} statuses={dict(sorted(statuses.items()))}"
    )
    print(f"\nV-06 race: {figures}")
    context = f"{figures}\nerrors: {errors[:5]}\nserver log:\n{log}"
    assert len(created) == PRODUCER_PROCESSES * JOBS_PER_PRODUCER, context
    assert errors == [], context
    assert duplicates == 0, context
    assert lost == set(), context
    assert len(rows) == len(created) and not not_completed, context
    assert bad_history == [], context
    assert set(statuses) <= {"enqueue 201", "claim 200", "claim 204", "complete 200"}, context
