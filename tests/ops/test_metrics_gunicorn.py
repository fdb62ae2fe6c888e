"""/metrics behind two app servers on one database, ``make serve``'s (granian) and plain
gunicorn: job figures are the database's from every server, HTTP figures add up over the
workers of a server."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from devservers.servers import Client, Gunicorn, Served, metrics, prepare_database, running
from tests.ops.metrics_help import parse, value

pytestmark = pytest.mark.slow
ENQUEUES = 60
CLIENTS = 6


def scrape(host: str, token: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    return parse(metrics(host, token))


def test_figures_agree_with_the_database_across_workers_and_servers(tmp_path: Path) -> None:
    database = prepare_database(
        tmp_path / "db", {"maker": "producer", "runner": "worker", "prom": "monitor"}
    )
    first = Served(database, tmp_path / "logs1", workers=3)
    second = Gunicorn(database, tmp_path / "logs2", workers=2)
    (tmp_path / "logs1").mkdir()
    (tmp_path / "logs2").mkdir()
    with running(first), running(second):

        def produce(n: int) -> int:
            client = Client(first.host, database.tokens["maker"])  # a fresh connection each
            try:
                created = 0
                for i in range(ENQUEUES // CLIENTS):
                    job_type = "email.send" if (n + i) % 3 else "report.build"
                    status, _, _ = client.post("/jobs", {"type": job_type})
                    created += status == 201
                return created
            finally:
                client.close()

        with ThreadPoolExecutor(CLIENTS) as pool:
            assert sum(pool.map(produce, range(CLIENTS))) == ENQUEUES
        worker = Client(second.host, database.tokens["runner"])
        for i in range(20):
            status, job, _ = worker.post("/jobs/claim")
            assert status == 200
            outcome = "complete" if i % 4 else "fail"
            body = {"error": "no", "retryable": False} if outcome == "fail" else None
            assert worker.post(f"/jobs/{job['id']}/{outcome}", body)[0] == 200
        worker.close()

        figures = [scrape(server.host, database.tokens["prom"]) for server in (first, second)]
        again = scrape(first.host, database.tokens["prom"])

    with sqlite3.connect(database.path) as conn:
        counts = dict(
            ((status, job_type), n)
            for status, job_type, n in conn.execute(
                "SELECT status, type, count(*) FROM jobs GROUP BY status, type"
            )
        )
        enqueued = dict(conn.execute("SELECT type, count(*) FROM jobs GROUP BY type").fetchall())
    for families in (*figures, again):
        for (status, job_type), n in counts.items():
            assert value(families, "queuelog_jobs", status=status, type=job_type) == n
        for job_type, n in enqueued.items():
            assert value(families, "queuelog_jobs_enqueued_total", type=job_type) == n
        assert value(families, "queuelog_jobs_finished_total", outcome="completed") == 15
        assert value(families, "queuelog_jobs_finished_total", outcome="failed") == 5
        assert value(families, "queuelog_job_wait_seconds_count") == 20
        assert value(families, "queuelog_job_run_seconds_count") == 20
    # Every enqueue went to the first server, whichever of its workers answered it.
    posted = value(figures[0], "queuelog_http_requests_total", route="/jobs", status="201")
    assert posted == ENQUEUES
    assert value(figures[1], "queuelog_http_requests_total", route="/jobs", status="201") == 0
    claims = value(figures[1], "queuelog_http_requests_total", route="/jobs/claim", status="200")
    assert claims == 20
