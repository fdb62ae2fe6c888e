"""Four processes enqueue, claim, complete, fail, release, recover leases, cancel, retry and
prune on one database at once (a SQLite file, then PostgreSQL): afterwards every figure the
triggers kept equals a recount from the jobs and their events."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import select

from app.infra import db
from app.storage.schema_figures import job_counts
from devservers.servers import REPO
from tests.backends import every_backend  # noqa: F401 (run on both engines)
from tests.builders import make_user
from tests.recount import assert_exact
from tests.reliability.churn import ADMIN, PRODUCERS, WEIGHTS, WORKERS, clock

PROCESSES = 4
OPS = 200


@pytest.mark.slow
def test_counts_stay_exact_through_a_race_of_processes(
    app: Flask, database_url: str, backend: str, tmp_path: Path
) -> None:
    for name in PRODUCERS:
        make_user(app, name, "producer", max_priority="high")
    for name in WORKERS:
        make_user(app, name, "worker")
    make_user(app, ADMIN, "admin")
    start = tmp_path / "start"
    argv = [sys.executable, "-m", "tests.reliability.churn", database_url]
    processes = [
        subprocess.Popen(
            [*argv, str(seed), str(OPS), str(start)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in range(PROCESSES)
    ]
    done: Counter[str] = Counter()
    try:
        start.touch()
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            done.update(json.loads(out))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()  # by its own pid
                process.wait(10)
    assert set(WEIGHTS) <= set(done), done  # every kind of operation succeeded at least once
    assert any("refused" in outcome for outcome in done)  # and some lost a race
    assert done["pruned jobs"] > 0
    with db.read(app) as conn:
        assert_exact(conn, clock(conn))
        shards = set(conn.execute(select(job_counts.c.shard)).scalars())
    if backend == "postgresql":  # the writers overlapped and counted in shards of their own
        assert len(shards) >= 2
    print(f"\n{PROCESSES} processes x {OPS} operations on {backend}: {dict(done)}")
