"""/metrics names the busiest partitions of each type (due and running jobs) and sums the others
under one series, so the series of a type never outnumber BUSIEST + 1, on both engines."""

from __future__ import annotations

from collections import Counter
from typing import Any

from flask import Flask
from sqlalchemy import select

from app.infra import db
from app.queue.usecases.partition_figures import BUSIEST
from app.queue.vocabulary.timeutil import utcnow
from app.storage.schema import jobs
from tests.backends import every_backend  # noqa: F401 (both engines)
from tests.builders import Api
from tests.ops.test_metrics import scrape

Samples = dict[str, list[tuple[str, dict[str, str], float]]]


def enqueue(producer: Api, job_type: str, partitions: list[str | None], **fields: Any) -> None:
    """One job per entry of ``partitions`` (None: no partition), in batches."""
    for start in range(0, len(partitions), 100):
        items = [
            {"type": job_type, **({"partition": p} if p else {}), **fields}
            for p in partitions[start : start + 100]
        ]
        response = producer.post("/jobs/batch", {"jobs": items})
        assert response.status_code == 201, response.get_data()[:300]


def series(families: Samples, family: str, job_type: str) -> dict[str, float]:
    """The family's samples of ``job_type``, by partition label."""
    return {
        labels["partition"]: v for _, labels, v in families[family] if labels["type"] == job_type
    }


def in_database(app: Flask, job_type: str, status: str) -> Counter[str]:
    """Jobs of the type in ``status`` per partition (due ones only when pending)."""
    query = select(jobs.c.partition).where(jobs.c.type == job_type, jobs.c.status == status)
    if status == "pending":
        query = query.where(jobs.c.run_at <= utcnow(), jobs.c.waiting_for.is_(None))
    with app.app_context(), db.read() as conn:
        return Counter(p or "(none)" for (p,) in conn.execute(query))


def assert_busiest_and_rest(shown: dict[str, float], actual: Counter[str]) -> None:
    """The named series are the BUSIEST largest partitions with their exact figures; the
    (other) series holds the rest."""
    named = {label: n for label, n in shown.items() if label != "(other)"}
    assert len(named) <= BUSIEST
    assert named == {label: actual[label] for label in named}
    unnamed = [n for label, n in actual.items() if label not in named]
    assert max(unnamed, default=0) <= min(named.values(), default=0)
    assert shown["(other)"] == sum(unnamed)


def test_the_busiest_partitions_are_named_and_the_rest_summed(
    app: Flask, admin: Api, producer: Api, worker: Api
) -> None:
    # p0 holds 9 jobs, p1 8, ... p7 2; three without a partition; one for later (not due)
    layout: list[str | None] = [f"p{i}" for i in range(8) for _ in range(9 - i)]
    enqueue(producer, "email.send", [*layout, None, None, None])
    enqueue(producer, "email.send", ["p7"], delay_seconds=3600)
    enqueue(producer, "report.build", ["r1", "r1", "r2"])
    for _ in range(10):  # fair turns: one job of each partition, then a second of some
        assert worker.claim(types=["email.send"]) is not None
    families = scrape(admin)

    due = series(families, "queuelog_partition_jobs_due", "email.send")
    assert_busiest_and_rest(due, in_database(app, "email.send", "pending"))
    assert list(due)[:2] == ["p0", "p1"]
    running = series(families, "queuelog_partition_jobs_running", "email.send")
    assert_busiest_and_rest(running, in_database(app, "email.send", "running"))
    assert sum(running.values()) == 10
    assert series(families, "queuelog_partition_jobs_due", "report.build") == {
        "r1": 2,
        "r2": 1,
        "(other)": 0,
    }
    # a type with no jobs has its (other) series only, at zero
    for family in ("queuelog_partition_jobs_due", "queuelog_partition_jobs_running"):
        assert series(families, family, "webhook.deliver") == {"(other)": 0}


def test_many_partitions_keep_the_series_bounded(
    app: Flask, admin: Api, producer: Api, worker: Api
) -> None:
    layout: list[str | None] = [f"t{i:02}" for i in range(50) for _ in range(1 + i % 4)]
    enqueue(producer, "email.send", layout)
    for _ in range(60):
        assert worker.claim(types=["email.send"]) is not None
    families = scrape(admin)
    for family, status in (
        ("queuelog_partition_jobs_due", "pending"),
        ("queuelog_partition_jobs_running", "running"),
    ):
        shown = series(families, family, "email.send")
        assert len(shown) == BUSIEST + 1, shown
        actual = in_database(app, "email.send", status)
        assert len(actual) > BUSIEST + 1
        assert_busiest_and_rest(shown, actual)
        assert sum(shown.values()) == sum(actual.values())
