"""On PostgreSQL an owner's idempotency keys are unique by an index of keyed jobs only (migration
0023): an enqueue that repeats a key, alone or in a batch, still finds the job by that index
among any number of jobs without a key, and a repeated key is still refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.job_requests import EnqueueBody
from app.queue.usecases import enqueueing
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import make_job, make_user
from tests.queue.sql.test_query_plans import recorded

UNKEYED = 5_000


def _index_names(node: dict[str, Any]) -> Iterator[str]:
    if "Index Name" in node:
        yield node["Index Name"]
    for child in node.get("Plans", []):
        yield from _index_names(child)


@pytest.mark.pg
@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_repeated_key_is_found_by_the_keyed_jobs_index(app: Flask) -> None:
    producer = make_user(app, "keyed-producer", "producer").actor()
    with app.app_context():
        settings = queue_settings()
        with db.transaction() as conn:
            first = make_job(conn, producer, settings, idempotency_key="k-1")
            conn.execute(  # many jobs without a key, then statistics that know them
                text(
                    "INSERT INTO jobs (type, payload, priority, max_retries, created_by, run_at, "
                    "created_at, updated_at) SELECT type, payload, priority, max_retries, "
                    "created_by, run_at, created_at, updated_at FROM jobs, generate_series(1, :n)"
                ),
                {"n": UNKEYED},
            )
        with db.engine(app).connect() as conn:
            conn.execute(text("ANALYZE jobs"))
            conn.commit()
        request = EnqueueBody.parse({"type": "email.send", "idempotency_key": "k-1"}, settings)
        with recorded(app) as statements, db.transaction() as conn:
            now = utcnow()
            found, created = enqueueing.enqueue(conn, producer, request.to_request(), now=now).value
            batch = enqueueing.enqueue_many(conn, producer, [request.to_request()], now=now).value
    assert (found.id, created) == (first.id, False)
    assert [(job.id, made) for job, made in batch] == [(first.id, False)]
    lookups = [(sql, params) for sql, params in statements if "idempotency_key" in sql]
    assert lookups
    raw = db.engine(app).raw_connection()
    try:
        cursor = raw.cursor()
        for sql, params in lookups:
            if not sql.lstrip().startswith("SELECT"):
                continue
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()
            top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
            assert "uq_jobs_owner_idempotency_key" in set(_index_names(top)), sql
    finally:
        raw.rollback()
        raw.close()
