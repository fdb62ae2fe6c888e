"""Progress messages are read by producers: they pass the same sanitizer as error texts."""

from __future__ import annotations

from flask import Flask

from tests.api.conftest import job_row
from tests.builders import Api


def test_sanitizer_covers_heartbeat_messages(app: Flask, producer: Api, worker: Api) -> None:
    job = producer.enqueue()
    worker.claim()
    token = "ghp_" + "A1b2C3d4E5" * 4
    message = f"\x1b[31mpushing\x1b[0m with {token} PGPASSWORD=hunter22 \u202eevil"
    response = worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 5, "message": message})
    assert response.status_code == 200
    stored = job_row(app, job["id"])["progress_message"]
    assert stored == "pushing with [REDACTED] PGPASSWORD=[REDACTED] evil"


def test_heartbeat_messages_lose_the_third_pass_variants(
    app: Flask, producer: Api, worker: Api
) -> None:
    job = producer.enqueue()
    worker.claim()
    message = (
        'PGPASSWORD="Quoted SecretPW" psql; curl -u deploy:pw2 x; '
        "postgres://u:pa/ssSLASHPW@db/x a\u200fb"
    )
    response = worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 5, "message": message})
    assert response.status_code == 200
    assert job_row(app, job["id"])["progress_message"] == (
        "PGPASSWORD=[REDACTED] psql; curl -u deploy:[REDACTED] x; postgres://[REDACTED]@db/x ab"
    )
