"""Secret payload fields: sealed at rest under SECRETS_KEY, handed out only in the
claim's answer to the worker that holds the job, shown to everyone else by name only, erased
when the job finishes for good. Every test runs on SQLite and PostgreSQL (tests/api/conftest)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from flask import Flask
from werkzeug.test import TestResponse

from app import create_app
from app.infra import db
from app.infra.secretbox import SecretBox
from tests.api.conftest import assert_problem, event_rows, job_row, snapshot
from tests.builders import PASSWORD, Api, make_token, make_user
from tests.conftest import TEST_SECRETS_KEY, base_config
from tests.web.conftest import sign_in

VALUE = "hunter2-Sekr1t-7f3c9e"  # distinctive: found anywhere but the claim, it leaked
OTHER = "pa55-w0rd-OTHER-41d2"
SECRETS = {"API_TOKEN": VALUE, "db.password": OTHER}


def _text(response: TestResponse) -> str:
    return response.get_data(as_text=True)


def _enqueue(producer: Api, **fields: Any) -> dict[str, Any]:
    return producer.enqueue(secrets=SECRETS, **fields)


def _sealed(app: Flask, job_id: int) -> str | None:
    return job_row(app, job_id)["secrets_sealed"]  # type: ignore[no-any-return]


def test_the_claim_hands_the_secrets_to_its_worker_and_nothing_else_shows_them(
    app: Flask, producer: Api, worker: Api, admin: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    job = _enqueue(producer)
    assert job["secret_names"] == ["API_TOKEN", "db.password"] and "secrets" not in job
    claimed = worker.claim()
    assert claimed is not None and claimed["secrets"] == SECRETS
    assert claimed["secret_names"] == ["API_TOKEN", "db.password"]
    job_id = job["id"]
    assert worker.post(f"/jobs/{job_id}/heartbeat", {"progress": 5}).status_code == 200
    answers = [
        producer.post("/jobs", {"type": "email.send", "secrets": SECRETS}),  # another job
        producer.get(f"/jobs/{job_id}"),
        producer.get("/jobs"),
        worker.get(f"/jobs/{job_id}"),  # the holder too: only the claim carries them
        worker.get("/jobs"),
        admin.get(f"/jobs/{job_id}"),
        admin.get("/jobs?status=running"),
        admin.get(f"/jobs/{job_id}/events"),
        admin.get(f"/jobs/{job_id}/explain"),
        admin.post("/jobs/bulk", {"action": "cancel", "filter": {}, "reason": "look"}),
        admin.get("/audit"),
        admin.get("/metrics"),
    ]
    assert [r.status_code for r in answers] == [201] + [200] * (len(answers) - 1)
    assert admin.get(f"/jobs/{job_id}").get_json()["secret_names"] == ["API_TOKEN", "db.password"]
    make_user(app, "boss", "admin", password=PASSWORD)
    boss = sign_in(app, "boss")
    pages = [f"/ui/jobs/{job_id}", "/ui/jobs", "/ui/", "/ui/jobs/bulk?action=cancel"]
    pages += ["/ui/admin/audit", "/ui/workers"]
    answers += [boss.get(page) for page in pages]
    assert [r.status_code for r in answers[-len(pages) :]] == [200] * len(pages)
    for response in answers:
        assert VALUE not in _text(response) and OTHER not in _text(response), response.request.path
    assert "API_TOKEN" in _text(boss.get(f"/ui/jobs/{job_id}"))  # the page names them
    for row in event_rows(app, job_id):
        assert VALUE not in json.dumps(row, default=str)
    assert VALUE not in caplog.text and OTHER not in caplog.text


def test_a_claim_of_many_hands_each_job_its_own_secrets(producer: Api, worker: Api) -> None:
    plain = producer.enqueue()
    first = _enqueue(producer)
    second = producer.enqueue(secrets={"ONLY": "the-second-one"})
    response = worker.post("/jobs/claim", {"max_jobs": 3})
    assert response.status_code == 200
    by_id = {job["id"]: job for job in response.get_json()["jobs"]}
    assert "secrets" not in by_id[plain["id"]] and by_id[plain["id"]]["secret_names"] == []
    assert by_id[first["id"]]["secrets"] == SECRETS
    assert by_id[second["id"]]["secrets"] == {"ONLY": "the-second-one"}


def test_the_database_holds_ciphertext_that_the_key_opens(app: Flask, producer: Api) -> None:
    job = _enqueue(producer)
    row = job_row(app, job["id"])
    sealed = row["secrets_sealed"]
    assert sealed and VALUE not in sealed and OTHER not in sealed
    assert row["secret_names"] == "API_TOKEN,db.password"
    assert VALUE not in json.dumps(row, default=str).replace(sealed, "")
    box = SecretBox.from_setting(TEST_SECRETS_KEY)
    assert json.loads(box.open(sealed)) == SECRETS


def test_a_batch_seals_each_items_own_secrets(app: Flask, producer: Api, worker: Api) -> None:
    items = [
        {"type": "email.send", "secrets": {"A": "first-value"}},
        {"type": "email.send"},
        {"type": "email.send", "secrets": SECRETS},
    ]
    response = producer.post("/jobs/batch", {"jobs": items})
    assert response.status_code == 201
    jobs = response.get_json()["jobs"]
    assert [job["secret_names"] for job in jobs] == [["A"], [], ["API_TOKEN", "db.password"]]
    assert VALUE not in _text(response)
    assert _sealed(app, jobs[1]["id"]) is None
    claimed = worker.post("/jobs/claim", {"max_jobs": 3}).get_json()["jobs"]
    assert [job.get("secrets") for job in claimed] == [{"A": "first-value"}, None, SECRETS]


def _fail_for_good(worker: Api, job_id: int, attempt: int) -> None:
    body = {"error": "no", "attempt": attempt, "retryable": False}
    assert worker.post(f"/jobs/{job_id}/fail", body).status_code == 200


@pytest.mark.parametrize("end", ["complete", "fail", "cancel_running", "cancel_pending"])
def test_the_secrets_are_erased_when_the_job_finishes_for_good(
    app: Flask, producer: Api, worker: Api, admin: Api, end: str
) -> None:
    job = _enqueue(producer)
    if end != "cancel_pending":
        claimed = worker.claim()
        assert claimed is not None and claimed["secrets"] == SECRETS
    if end == "complete":
        assert worker.post(f"/jobs/{job['id']}/complete", {}).status_code == 200
    elif end == "fail":
        _fail_for_good(worker, job["id"], 1)
    else:
        assert admin.post(f"/jobs/{job['id']}/cancel").status_code == 200
    row = job_row(app, job["id"])
    assert row["secrets_sealed"] is None and row["status"] in ("completed", "failed", "cancelled")
    assert row["secret_names"] == "API_TOKEN,db.password"  # the names stay, as history
    if end == "complete":
        return
    # An admin retry runs the job again without them: its claim says so with {}.
    assert admin.post(f"/jobs/{job['id']}/retry").status_code == 200
    again = worker.claim()
    assert again is not None and again["secrets"] == {}


def test_a_bulk_cancel_erases_them_too(app: Flask, producer: Api, admin: Api) -> None:
    job = _enqueue(producer)
    body = {"action": "cancel", "filter": {}, "reason": "tidy", "expect_count": 1}
    assert admin.post("/jobs/bulk", body).status_code == 200
    assert _sealed(app, job["id"]) is None


def test_a_child_cancelled_by_its_parents_failure_loses_them_too(
    app: Flask, producer: Api, admin: Api
) -> None:
    parent = producer.enqueue()
    child = _enqueue(producer, depends_on=[parent["id"]])
    assert _sealed(app, child["id"]) is not None
    assert admin.post(f"/jobs/{parent['id']}/cancel").status_code == 200
    row = job_row(app, child["id"])
    assert (row["status"], row["secrets_sealed"]) == ("cancelled", None)


def test_a_retried_attempt_keeps_them_for_the_next_one(
    app: Flask, producer: Api, worker: Api
) -> None:
    job = _enqueue(producer, max_retries=1)
    assert worker.claim() is not None
    body = {"error": "try again", "attempt": 1, "retry_in": 0}
    assert worker.post(f"/jobs/{job['id']}/fail", body).get_json()["status"] == "pending"
    assert _sealed(app, job["id"]) is not None
    second = worker.claim()
    assert second is not None and (second["attempt"], second["secrets"]) == (2, SECRETS)
    _fail_for_good(worker, job["id"], 2)
    assert _sealed(app, job["id"]) is None


BAD_SECRETS: list[tuple[Any, str]] = [
    ({f"N{i}": "v" for i in range(17)}, "limit is 16"),
    ({"1abc": "v"}, "names must be"),
    ({"has space": "v"}, "names must be"),
    ({"a,b": "v"}, "names must be"),
    ({"A": 1}, "must be a string"),
    ({"A": "nul\u0000"}, "must be a string"),
    ({"A": "x" * 4100}, "limit is 4096"),
    (["A"], "must be an object"),
]


def test_bad_secrets_are_422_naming_the_field_and_change_nothing(app: Flask, producer: Api) -> None:
    before = snapshot(app)
    for secrets, says in BAD_SECRETS:
        response = producer.post("/jobs", {"type": "email.send", "secrets": secrets})
        assert says in assert_problem(response, 422)["errors"]["secrets"], secrets
        batch = {"jobs": [{"type": "email.send"}, {"type": "email.send", "secrets": secrets}]}
        problem = assert_problem(producer.post("/jobs/batch", batch), 422)
        assert says in problem["errors"]["jobs[1].secrets"], secrets
    assert snapshot(app) == before


def test_an_idempotent_repeat_compares_names_and_never_hashes_values(
    app: Flask, producer: Api
) -> None:
    first = _enqueue(producer, idempotency_key="k-1")
    again = producer.post(
        "/jobs", {"type": "email.send", "secrets": SECRETS, "idempotency_key": "k-1"}
    )
    assert again.status_code == 200 and again.get_json()["id"] == first["id"]
    other = {"type": "email.send", "secrets": {"ELSE": "x"}, "idempotency_key": "k-1"}
    assert_problem(producer.post("/jobs", other), 422)
    stored = job_row(app, first["id"])["request_fingerprint"]
    assert VALUE not in stored and hashlib.sha256(VALUE.encode()).hexdigest() != stored


@pytest.fixture
def keyless(database_url: str) -> Iterator[Flask]:
    """A production app without SECRETS_KEY, on the test's database."""
    application = create_app(base_config(database_url, SECRETS_KEY=None, PRODUCTION=True))
    yield application
    db.close(application)


def test_without_a_key_the_server_starts_and_refuses_secrets_naming_the_setting(
    keyless: Flask, app: Flask
) -> None:
    make_user(app, "maker", "producer")  # on the shared database, through the keyed app
    maker = Api(keyless.test_client(), make_token(keyless, "maker"))
    assert keyless.config["SECRETS_KEY"] is None
    problem = assert_problem(maker.post("/jobs", {"type": "email.send", "secrets": SECRETS}), 422)
    assert "SECRETS_KEY" in problem["errors"]["secrets"]
    assert VALUE not in json.dumps(problem)
    batch = {"jobs": [{"type": "email.send", "secrets": {"A": "b"}}]}
    assert (
        "SECRETS_KEY"
        in assert_problem(maker.post("/jobs/batch", batch), 422)["errors"]["jobs[0].secrets"]
    )
    assert maker.post("/jobs", {"type": "email.send"}).status_code == 201  # the rest works


def _app_with_key(database_url: str, key: str) -> Flask:
    return create_app(base_config(database_url, SECRETS_KEY=key))


def test_a_rotated_key_list_opens_old_jobs_and_seals_new_ones_with_the_new_key(
    app: Flask, database_url: str, producer: Api, worker: Api
) -> None:
    old = _enqueue(producer)
    new_key = Fernet.generate_key().decode()
    rotated = _app_with_key(database_url, f"{new_key},{TEST_SECRETS_KEY}")
    try:
        client = rotated.test_client()
        producer_now, worker_now = Api(client, producer.token), Api(client, worker.token)
        newer = producer_now.enqueue(secrets={"NEW": "sealed-with-the-new-key"})
        sealed = _sealed(rotated, newer["id"])
        assert sealed is not None
        assert SecretBox.from_setting(new_key).open(sealed) == '{"NEW":"sealed-with-the-new-key"}'
        claimed = worker_now.post("/jobs/claim", {"max_jobs": 2}).get_json()["jobs"]
        assert {job["id"]: job["secrets"] for job in claimed} == {
            old["id"]: SECRETS,
            newer["id"]: {"NEW": "sealed-with-the-new-key"},
        }
    finally:
        db.close(rotated)


def test_secrets_no_key_opens_stop_the_claim_and_leave_the_job_pending(
    app: Flask, database_url: str, producer: Api, worker: Api
) -> None:
    job = _enqueue(producer)
    dropped = _app_with_key(database_url, Fernet.generate_key().decode())  # the old key is gone
    try:
        response = Api(dropped.test_client(), worker.token).post("/jobs/claim")
        problem = assert_problem(response, 503)
        assert "SECRETS_KEY" in problem["detail"]
    finally:
        db.close(dropped)
    assert job_row(app, job["id"])["status"] == "pending"  # the claim was rolled back
    assert worker.claim() is not None  # and the right key still opens them
