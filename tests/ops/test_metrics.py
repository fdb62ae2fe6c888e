"""/metrics: the exposition parses, the families and labels exist, the figures agree with the
database, and only admins and monitors may read it (monitors nothing else)."""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from app.infra import db
from app.storage.schema import jobs
from tests.api.conftest import assert_problem
from tests.backends import every_backend  # noqa: F401 (both engines)
from tests.builders import Api, make_api
from tests.ops.metrics_help import FAMILIES, parse, value


def scrape(api: Api) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    response = api.get("/metrics")
    assert response.status_code == 200, response.get_data()[:300]
    assert response.content_type.startswith("text/plain; version=0.0.4")
    return parse(response.get_data(as_text=True))


def traffic(producer: Api, worker: Api, admin: Api) -> None:
    """Jobs in every final state over two types."""
    for i in range(6):
        producer.enqueue("email.send" if i % 2 else "report.build", payload={"i": i})
    producer.enqueue("email.send", delay_seconds=3600)  # not due: no age, no wait
    for outcome in ("complete", "fail", "complete"):
        job = worker.claim()
        assert job is not None
        body = {"error": "boom", "retryable": False} if outcome == "fail" else None
        assert worker.post(f"/jobs/{job['id']}/{outcome}", body).status_code == 200
    pending = producer.get("/jobs?status=pending").get_json()["jobs"]
    assert admin.post(f"/jobs/{pending[-1]['id']}/cancel").status_code == 200


def db_counts(app: Flask) -> dict[tuple[str, str], int]:
    with app.app_context(), db.read() as conn:
        rows = conn.execute(
            select(jobs.c.status, jobs.c.type, func.count()).group_by(jobs.c.status, jobs.c.type)
        )
        return {(status, job_type): n for status, job_type, n in rows}


def test_exposition_has_every_family_and_label(admin: Api, producer: Api) -> None:
    producer.enqueue()
    families = scrape(admin)
    for name, (_, labels) in FAMILIES.items():
        samples = families[name]
        assert samples, name
        for sample, have, _ in samples:
            assert labels <= set(have) | {"le"}, (name, sample, have)


def test_job_figures_agree_with_the_database(
    app: Flask, admin: Api, producer: Api, worker: Api
) -> None:
    traffic(producer, worker, admin)
    families = scrape(admin)
    for (status, job_type), count in db_counts(app).items():
        assert value(families, "queuelog_jobs", status=status, type=job_type) == count
    assert value(families, "queuelog_jobs") == 7
    assert value(families, "queuelog_jobs_enqueued_total", type="email.send") == 4
    assert value(families, "queuelog_jobs_enqueued_total", type="report.build") == 3
    assert value(families, "queuelog_jobs_enqueued_total", type="webhook.deliver") == 0
    assert value(families, "queuelog_jobs_finished_total", outcome="completed") == 2
    assert value(families, "queuelog_jobs_finished_total", outcome="failed") == 1
    assert value(families, "queuelog_jobs_finished_total", outcome="cancelled") == 1
    assert value(families, "queuelog_job_wait_seconds_count") == 3
    assert value(families, "queuelog_job_run_seconds_count") == 3
    assert value(families, "queuelog_job_run_seconds_bucket", le="+Inf") == 3
    assert 0 <= value(families, "queuelog_oldest_due_job_age_seconds") < 60
    assert value(families, "queuelog_oldest_due_job_age_seconds", type="webhook.deliver") == 0


def test_totals_grow_by_exactly_the_new_events(admin: Api, producer: Api, worker: Api) -> None:
    traffic(producer, worker, admin)
    before = scrape(admin)
    assert scrape(admin)["queuelog_jobs_enqueued"] == before["queuelog_jobs_enqueued"]
    producer.enqueue("webhook.deliver")
    job = worker.claim()
    assert job is not None
    worker.post(f"/jobs/{job['id']}/complete")
    after = scrape(admin)
    grown = value(after, "queuelog_jobs_enqueued_total") - value(
        before, "queuelog_jobs_enqueued_total"
    )
    assert grown == 1
    assert value(after, "queuelog_jobs_finished_total", outcome="completed") == 3
    assert value(after, "queuelog_job_wait_seconds_count") == 4


def test_http_figures_use_the_route_rule_not_the_path(admin: Api, producer: Api) -> None:
    job = producer.enqueue()
    producer.get(f"/jobs/{job['id']}")
    # Letters, not digits: the exposition's timestamps are digits and once held "12345".
    producer.get("/no/such/path/unlisted-page")
    text = admin.get("/metrics").get_data(as_text=True)
    families = parse(text)
    assert value(families, "queuelog_http_requests_total", route="/jobs/<id:job_id>") >= 1
    assert value(families, "queuelog_http_requests_total", route="unmatched", status="404") >= 1
    assert f'/jobs/{job["id"]}"' not in text and "unlisted-page" not in text
    assert value(families, "queuelog_http_request_duration_seconds_count", route="/jobs") >= 1


def test_role_matrix(
    app: Flask, client: FlaskClient, anonymous: Api, producer: Api, worker: Api, admin: Api
) -> None:
    monitor = make_api(app, client, "prometheus", "monitor")
    assert_problem(anonymous.get("/metrics"), 401)
    assert_problem(Api(client, "ql_not-a-token").get("/metrics"), 401)
    assert_problem(producer.get("/metrics"), 403)
    assert_problem(worker.get("/metrics"), 403)
    assert admin.get("/metrics").status_code == 200
    assert monitor.get("/metrics").status_code == 200


def test_monitor_reads_metrics_and_nothing_else(
    app: Flask, client: FlaskClient, producer: Api
) -> None:
    monitor = make_api(app, client, "prometheus", "monitor")
    job = producer.enqueue()
    for method, path in [
        ("GET", "/jobs"),
        ("POST", "/jobs"),
        ("GET", f"/jobs/{job['id']}"),
        ("GET", f"/jobs/{job['id']}/events"),
        ("POST", "/jobs/claim"),
        ("POST", f"/jobs/{job['id']}/cancel"),
        ("POST", f"/jobs/{job['id']}/retry"),
        ("POST", f"/jobs/{job['id']}/complete"),
        ("GET", "/audit"),
    ]:
        call = monitor.get if method == "GET" else monitor.post
        assert_problem(call(path), 403)
    assert producer.get(f"/jobs/{job['id']}").get_json()["status"] == "pending"


def test_a_paused_type_reads_1(admin: Api) -> None:
    """A paused type's jobs wait however old they get: the gauge says why."""
    patched = admin.client.patch(
        "/types/webhook.deliver", json={"paused": True}, headers=admin.headers()
    )
    assert patched.status_code == 200
    paused = {have["type"]: value for _, have, value in scrape(admin)["queuelog_type_paused"]}
    assert paused == {"email.send": 0.0, "report.build": 0.0, "webhook.deliver": 1.0}


def test_waiting_work_leaves_out_paused_types(producer: Api, admin: Api) -> None:
    """An alert on waiting work does not fire for a pause: the paused type's pending jobs are
    still counted as jobs (queuelog_jobs), but not as waiting work."""
    for job_type in ("webhook.deliver", "webhook.deliver", "email.send"):
        producer.enqueue(job_type, run_at="2020-01-01T00:00:00Z")

    def waiting() -> dict[str, tuple[float, float]]:
        found = scrape(admin)
        counts = {have["type"]: v for _, have, v in found["queuelog_jobs_waiting"]}
        ages = {have["type"]: v for _, have, v in found["queuelog_oldest_waiting_job_age_seconds"]}
        return {job_type: (counts[job_type], ages[job_type]) for job_type in counts}

    before = waiting()
    assert before["webhook.deliver"][0] == 2 and before["webhook.deliver"][1] > 3600
    assert before["email.send"][0] == 1 and before["report.build"] == (0, 0)
    answer = admin.client.patch(
        "/types/webhook.deliver", json={"paused": True}, headers=admin.headers()
    )
    assert answer.status_code == 200
    after = waiting()
    assert after["webhook.deliver"] == (0, 0) and after["email.send"][0] == 1
    pending = {
        have["type"]: v
        for _, have, v in scrape(admin)["queuelog_jobs"]
        if have["status"] == "pending"
    }
    assert pending["webhook.deliver"] == 2


def test_waiting_work_leaves_out_jobs_waiting_for_parents(
    producer: Api, worker: Api, admin: Api
) -> None:
    """A job waiting for its parent is a job (queuelog_jobs) but not waiting work: no worker
    could be handed it. Once the parent completes, it is."""
    parent = producer.enqueue("report.build")
    child = producer.post("/jobs", {"type": "email.send", "depends_on": [parent["id"]]})
    assert child.status_code == 201 and child.get_json()["waiting_for"] == [parent["id"]]

    def waiting(job_type: str) -> float:
        found = scrape(admin)["queuelog_jobs_waiting"]
        return next(v for _, have, v in found if have["type"] == job_type)

    pending = {
        have["type"]: v
        for _, have, v in scrape(admin)["queuelog_jobs"]
        if have["status"] == "pending"
    }
    assert pending["email.send"] == 1 and waiting("email.send") == 0
    assert waiting("report.build") == 1
    claimed = worker.claim()
    assert claimed is not None and claimed["id"] == parent["id"]
    done = worker.post(f"/jobs/{parent['id']}/complete", {"attempt": claimed["attempt"]})
    assert done.status_code == 200
    assert waiting("email.send") == 1 and waiting("report.build") == 0
