"""The sanitizer against a corpus of real notations: no piece of a secret stays, the rest does."""

from __future__ import annotations

import pytest

from app.queue.rules.sanitize import MARKER, PATH_MARKER, sanitize_error
from tests.queue.rules.sanitize_corpus import CORPUS, Case

PIECE = 4  # no run of this many of a secret's characters may survive


def surviving_pieces(secret: str, text: str, clean: str) -> list[str]:
    """The runs of PIECE characters of ``secret`` still in ``clean`` (those that ``text``
    holds elsewhere too, outside the secret, do not count)."""
    elsewhere = text.replace(secret, "\0")
    pieces = {secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)}
    return sorted(p for p in pieces if p in clean and p not in elsewhere and p.strip())


def test_the_corpus_is_large_and_each_row_is_its_own_notation() -> None:
    assert len(CORPUS) >= 100
    assert len({case.notation for case in CORPUS}) == len(CORPUS)
    for case in CORPUS:
        assert case.secret in case.text, case.notation
        assert len(case.secret) >= 8, case.notation


@pytest.mark.parametrize("case", CORPUS, ids=[case.notation for case in CORPUS])
def test_no_piece_of_the_secret_survives(case: Case) -> None:
    clean = sanitize_error(case.text)
    assert surviving_pieces(case.secret, case.text, clean) == [], clean
    assert MARKER in clean


@pytest.mark.parametrize("case", CORPUS, ids=[case.notation for case in CORPUS])
def test_the_words_around_the_secret_stay(case: Case) -> None:
    clean = sanitize_error(case.text)
    for words in case.kept:
        assert words in clean, (words, clean)


@pytest.mark.parametrize("case", CORPUS, ids=[case.notation for case in CORPUS])
def test_sanitizing_twice_changes_nothing_more(case: Case) -> None:
    once = sanitize_error(case.text)
    assert sanitize_error(once) == once


# What is kept: texts without credentials come back unchanged, whatever their notation, except
# absolute paths. Names that only look like secrets' (an idempotency key, a token count, a
# password's length), placeholders (None, ***, ${VAR}, %s) and answers like "using password:
# YES" stay; commit hashes, digests, UUIDs, job ids and numbers in prose stay.
ORDINARY = [
    'Traceback (most recent call last):\n  File "worker.py", line 42, in send\n'
    "    response = client.post(url, json=payload, timeout=10)\n"
    "httpx.ConnectTimeout: timed out after 10.0s (attempt 3 of 5)",
    "KeyError: 'password'",
    "TypeError: connect() missing 1 required positional argument: 'password'",
    "ValueError: password must be at least 12 characters",
    'FATAL:  password authentication failed for user "app"',
    "Access denied for user 'bob'@'localhost' (using password: YES)",
    "django.core.exceptions.ImproperlyConfigured: The SECRET_KEY setting must not be empty.",
    "Set the API_KEY environment variable and retry",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b broke the build",
    "image sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 pulled",
    "sha1=da39a3ee5e6b4b0d3255bfef95601890afd80709 mismatch",
    "job 4f1c2a9e-8b7d-4e3f-9a1b-2c3d4e5f6a7b failed after 3 retries",
    "job_id=12345 attempt=3 priority=high",
    "idempotency_key=order-42 already used",
    "unique_key=daily-report-2026-12-05 is taken",
    "max_tokens=4096 exceeded; token_count=5120",
    "password_length=8 is below the policy",
    "Bearer token missing",
    "password=None",
    "password=******** user=bob",
    "password=${DB_PASSWORD}",
    "cursor.execute('UPDATE users SET password = %s WHERE id = %s')",
    "GET https://api.example.com/v1/jobs?page=2&limit=50 returned 503",
    "ssh://git@github.com/o/r.git refused",
    "Connection refused: localhost:5432",
    "retry in 2.5s; 429 Too Many Requests (token bucket empty)",
    "docker login --password-stdin -u bob registry.example.com",
    "key=customer-42 not found in cache",
    'Error from server (NotFound): secrets "db-creds" not found',
    "user: bob\nhost: db\nport: 5432",
    '{"token_type": "Bearer", "expires_in": 3600}',
    "tokenizer failed on line 3",
    "",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_texts_are_kept(text: str) -> None:
    assert sanitize_error(text) == text


def test_paths_are_the_one_change_to_an_ordinary_traceback() -> None:
    text = 'File "/srv/app/jobs/email.py", line 42, in send\nOSError: [Errno 28] No space left'
    assert sanitize_error(text) == text.replace("/srv/app/jobs/email.py", PATH_MARKER)


def test_each_secret_of_a_long_traceback_goes_and_its_lines_stay() -> None:
    text = "\n".join(f"line {n}: {case.text}" for n, case in enumerate(CORPUS[:40]))
    clean = sanitize_error(text, 64 * 1024)
    for n, case in enumerate(CORPUS[:40]):
        assert f"line {n}: " in clean
        assert surviving_pieces(case.secret, text, clean) == [], case.notation
