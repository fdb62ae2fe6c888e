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


def test_a_heartbeat_message_with_a_lone_surrogate_is_mended_not_refused(
    app: Flask, producer: Api, worker: Api
) -> None:
    """A message naming a file that is not UTF-8 is kept as an error would be (U+FFFD), in a
    single heartbeat and in a batch of them."""
    first, second = producer.enqueue(), producer.enqueue()
    worker.claim(max_jobs=2)
    one = worker.post(f"/jobs/{first['id']}/heartbeat", {"progress": 5, "message": "a\udcffb"})
    assert one.status_code == 200, one.get_data()[:300]
    beat = {"id": second["id"], "attempt": 1, "progress": 6, "message": "c\ud800d"}
    many = worker.post("/jobs/heartbeat", {"jobs": [beat]})
    assert many.status_code == 200, many.get_data()[:300]
    assert job_row(app, first["id"])["progress_message"] == "a\ufffdb"
    assert job_row(app, second["id"])["progress_message"] == "c\ufffdd"
