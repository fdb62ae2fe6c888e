"""Concurrent enqueues of one unique key through gunicorn (two worker processes, threaded),
on a SQLite file and on PostgreSQL: exactly one job per key, every answer 200 or 201 (one
201 per key), never a 500; batches holding the same keys in opposite orders never deadlock."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from devservers.servers import Client, Database, Gunicorn, prepare_database
from tests.backends import every_backend  # noqa: F401 (run on both engines)

pytestmark = pytest.mark.slow

THREADS, ROUNDS = 12, 5
TIMEOUT = 60.0


@pytest.fixture
def database(database_url: str, backend: str, tmp_path: Path) -> Database:
    url = database_url if backend == "postgresql" else None  # SQLite: a file of its own
    return prepare_database(tmp_path / "db", {"shop": "producer"}, url=url)


@pytest.fixture
def server(database: Database, tmp_path: Path) -> Iterator[Gunicorn]:
    gunicorn = Gunicorn(database, tmp_path, workers=2)
    try:
        yield gunicorn.start()
    finally:
        gunicorn.stop()


def _request(index: int, round_: int) -> tuple[str, dict[str, Any]]:
    """Even threads send one job; odd ones a batch with the round's two keys, in an order of
    their own."""
    keys = [f"digest-{round_}", f"report-{round_}"]
    if index % 2 == 0:
        return "/jobs", {"type": "email.send", "unique_key": keys[0]}
    ordered = keys if index % 4 == 1 else keys[::-1]
    return "/jobs/batch", {"jobs": [{"type": "email.send", "unique_key": k} for k in ordered]}


def _jobs_by_key(database: Database) -> dict[str, list[int]]:
    """Every job's id under its unique key, read from the database."""
    engine = create_engine(database.url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT unique_key, id FROM jobs ORDER BY id")).all()
    finally:
        engine.dispose()
    found: dict[str, list[int]] = {}
    for key, job_id in rows:
        found.setdefault(key, []).append(job_id)
    return found


def test_concurrent_enqueues_of_one_key_make_one_job(
    server: Gunicorn, database: Database, backend: str
) -> None:
    sent: list[tuple[dict[str, Any], int, Any]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def send(index: int) -> None:
        client = Client(server.host, database.tokens["shop"], timeout=TIMEOUT)
        try:
            for round_ in range(ROUNDS):
                path, body = _request(index, round_)
                barrier.wait(TIMEOUT)  # every thread sends each round at once
                status, answer, _ = client.post(path, body)
                with lock:
                    sent.append((body, status, answer))
        finally:
            client.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT * ROUNDS)
    assert len(sent) == THREADS * ROUNDS
    assert [(status, answer) for _, status, answer in sent if status not in (200, 201)] == []

    by_key = _jobs_by_key(database)
    keys = {f"{kind}-{r}" for kind in ("digest", "report") for r in range(ROUNDS)}
    assert {key: len(ids) for key, ids in by_key.items()} == dict.fromkeys(keys, 1)
    created: Counter[str] = Counter()
    for body, status, answer in sent:
        if "jobs" in body:  # a batch: one answer per item, in request order
            items = zip(body["jobs"], answer["jobs"], answer["created"], strict=True)
        else:
            items = iter([(body, answer, status == 201)])
        for item, job, new in items:
            assert job["id"] == by_key[item["unique_key"]][0]  # the key's one job, every time
            assert job.get("duplicate", False) is not new
            created[item["unique_key"]] += new
    assert created == Counter(dict.fromkeys(keys, 1))  # one 201 (or created item) per key
    duplicates = sum(len(b.get("jobs", [b])) for b, _, _ in sent) - len(keys)
    print(
        f"\n{THREADS} threads x {ROUNDS} rounds on {backend} (gunicorn, 2 processes): "
        f"{len(sent)} answers, every one 200/201; {len(keys)} jobs made, {duplicates} "
        "duplicates answered"
    )
