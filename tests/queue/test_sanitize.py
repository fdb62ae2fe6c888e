"""Error redaction: secrets out, then a 4 KiB cap, bounded work on hostile input."""

from __future__ import annotations

import pytest

from app.queue.sanitize import MARKER, PATH_MARKER, TRUNCATED, sanitize_error


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("connect failed: postgresql://app:s3cretpw@db:5432/prod", "s3cretpw"),
        ("redis://:redispw@cache:6379/0 refused", "redispw"),
        ("amqp://guest:guestpw@rabbit:5672/", "guestpw"),
        ("fetch https://alice:pa%40ss@example.com/x failed", "pa%40ss"),
        ("dsn postgres://u:p@ss@host/db", "p@ss"),
        ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
        ("authorization=Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("sent bearer tok_live_12345 upstream", "tok_live_12345"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sigSIGsig rejected", "sigSIGsig"),
        ("key AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE"),
        ("temp key ASIAIOSFODNN7EXAMPLE denied", "ASIAIOSFODNN7EXAMPLE"),
        ("password=hunter22 rejected", "hunter22"),
        ("PASSWORD: 'Hunter22'", "Hunter22"),
        ('{"password": "hunter22", "user": "bob"}', "hunter22"),
        ('{"password": "correct horse battery staple"}', "horse battery"),
        ("secret_key = 'two words'", "words"),
        ('token="unterminated quoted value', "quoted value"),
        ("secret=topsecret&next=1", "topsecret"),
        ("token=tkn123;", "tkn123"),
        ("api_key=ak-999", "ak-999"),
        ("api-key: ak-999", "ak-999"),
        ("apikey=ak-999", "ak-999"),
        ("client_secret=cs-1", "cs-1"),
        ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "wJalrXUtnFEMI"),
        ("Server=db;Password=S3cret!;", "S3cret!"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAsecret\n"
            "-----END RSA PRIVATE KEY-----",
            "MIIEpAIBAAKCAQEAsecret",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk (cut off", "b3BlbnNzaC1rZXk"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvAIBADANBg\n-----END PRIVATE KEY-----", "MIIEvAIB"),
        ('File "/home/deploy/app/jobs.py", line 3', "/home/deploy"),
        ("open /etc/queuelog/secret.toml: denied", "/etc/queuelog"),
        (r"C:\Users\bob\secrets.txt not found", "bob"),
    ],
)
def test_secrets_are_redacted(text: str, secret: str) -> None:
    clean = sanitize_error(text)
    assert secret not in clean
    assert MARKER in clean or PATH_MARKER in clean


def test_context_around_secrets_is_kept() -> None:
    clean = sanitize_error("login failed for bob: password=hunter22 (attempt 3)")
    assert clean == f"login failed for bob: password={MARKER} (attempt 3)"
    dsn = sanitize_error("cannot reach postgresql://app:pw@db.internal:5432/prod")
    assert dsn == f"cannot reach postgresql://{MARKER}@db.internal:5432/prod"
    path = sanitize_error('File "/srv/app/worker.py", line 12, in run')
    assert path == f'File "{PATH_MARKER}", line 12, in run'


@pytest.mark.parametrize(
    "text",
    [
        "division by zero",
        "HTTP 503 from https://api.example.com/v1/send",
        "ratio 1/2 exceeded",
        "timeout after 30s",
        "KeyError: 'password'",
        "tokenizer failed",
        "",
    ],
)
def test_harmless_text_is_unchanged(text: str) -> None:
    assert sanitize_error(text) == text


def test_nul_and_lone_surrogates_are_replaced() -> None:
    clean = sanitize_error("a\x00b\ud800c")
    assert "\x00" not in clean
    clean.encode("utf-8")  # strict: would raise on a lone surrogate


def test_text_is_capped_at_max_bytes_on_a_character_boundary() -> None:
    clean = sanitize_error("é" * 5000, 4096)
    encoded = clean.encode("utf-8")
    assert len(encoded) <= 4096
    assert clean.endswith(TRUNCATED)
    assert set(clean.removesuffix(TRUNCATED)) == {"é"}
    assert sanitize_error("x" * 4096) == "x" * 4096
    assert sanitize_error("x" * 4097).endswith(TRUNCATED)
    assert len(sanitize_error("x" * 100, 10).encode()) <= 10 + len(TRUNCATED.encode())


@pytest.mark.parametrize(
    ("secret", "piece"),
    [
        ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSF"),
        ("postgres://admin:s3cretpassw0rd@db.example.com/prod", "s3cr"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "eyJhbGci"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAkey", "MIIEpAIB"),
    ],
)
def test_redaction_runs_before_truncation(secret: str, piece: str) -> None:
    room = 4096 - len(TRUNCATED.encode())
    # Put the cut inside the secret: truncating first would leave a piece of it behind.
    for offset in range(2, len(secret) - 2):
        clean = sanitize_error("x" * (room - offset - 1) + " " + secret + " after", 4096)
        assert len(clean.encode()) <= 4096
        assert piece not in clean, (offset, clean[-40:])


HOSTILE = {
    "plain": "a" * 1_000_000,
    "dsn prefixes": "://" * 340_000,
    "dsn no at": "://" + "a:" * 499_000,
    "jwt starts": "eyJ" * 333_000,
    "jwt dots": "eyJa." * 200_000,
    "bearer words": "bearer " * 142_000,
    "authorization": "authorization: " * 66_000,
    "password keys": "password=" * 111_000,
    "password no value": "password" * 125_000,
    "aws": "AKIA" * 250_000,
    "slashes": "/" * 1_000_000,
    "path segments": "/a" * 500_000,
    "windows": "C:\\" * 333_000,
    "pem headers": "-----BEGIN RSA PRIVATE KEY-----" * 32_000,
    "pem ends": "-----BEGIN PRIVATE KEY-----" + "-----END" * 120_000,
    "open quotes": 'password="' + "a" * 1_000_000,
    "quoted keys": 'token="' * 150_000,
    "mixed": ("password=x://a:b@" + "/tmp/x " + "Bearer eyJa.b ") * 30_000,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_megabyte_of_hostile_text_is_sanitized_and_bounded(text: str) -> None:
    assert len(text) >= 900_000
    clean = sanitize_error(text)
    assert len(clean.encode("utf-8")) <= 4096
