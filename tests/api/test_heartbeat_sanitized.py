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


# Issue #41: a PGP key block and a Ruby assignment reached the producer and the admin verbatim.
PGP_BLOCK = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGX1pgpSECRETbody0Zx9\n=Ab1c\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)
RUBY = 'config = {:password=>"rubySecretPW", :name=>"bob"}'


def test_heartbeat_messages_lose_key_blocks_and_ruby_assignments(
    app: Flask, producer: Api, worker: Api
) -> None:
    job = producer.enqueue()
    worker.claim()
    message = f"signing with {PGP_BLOCK} using {RUBY}"
    response = worker.post(f"/jobs/{job['id']}/heartbeat", {"progress": 5, "message": message})
    assert response.status_code == 200
    expected = 'signing with [REDACTED] using config = {:password=>[REDACTED], :name=>"bob"}'
    assert job_row(app, job["id"])["progress_message"] == expected
    assert producer.get(f"/jobs/{job['id']}").get_json()["progress_message"] == expected


def test_failure_errors_lose_key_blocks_and_ruby_assignments(
    app: Flask, producer: Api, worker: Api, admin: Api
) -> None:
    job = producer.enqueue(max_retries=0)
    worker.claim()
    error = f"gpg failed: {PGP_BLOCK}\n{RUBY}"
    assert worker.post(f"/jobs/{job['id']}/fail", {"error": error}).status_code == 200
    expected = 'gpg failed: [REDACTED]\nconfig = {:password=>[REDACTED], :name=>"bob"}'
    assert job_row(app, job["id"])["error"] == expected
    assert admin.get(f"/jobs/{job['id']}").get_json()["error"] == expected
